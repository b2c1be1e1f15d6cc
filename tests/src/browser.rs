//! Chromium headless as a reader of our pages: the DOM after the page's script ran
//! (`--dump-dom`) and what the page said on the console. Chromium is told to resolve no host name,
//! so neither it nor a page can reach anything beyond this machine.
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::dom::{Dom, El};

/// How long a page may take to load and run its script.
const PAGE_TIME: Duration = Duration::from_secs(60);

/// A page as Chromium left it.
#[derive(Debug)]
pub struct Loaded {
    /// The serialized DOM after the load event (the page's script has run).
    pub html: String,
    /// Every console message of the page, in words (an uncaught error is one).
    pub console: Vec<String>,
}

impl Loaded {
    pub fn dom(&self) -> Dom {
        Dom::parse(&self.html)
    }
}

/// Asserts what any page of ours must show once loaded: its script finished (`data-ready="1"`)
/// without an error (`data-errors`), it said nothing on the console, and it references nothing
/// outside itself. Returns its DOM.
pub fn assert_clean(page: &Loaded) -> Dom {
    let dom = page.dom();
    let html = dom.first("html").expect("an <html> element");
    assert_eq!(
        html.attr("data-errors"),
        None,
        "the page's script failed; console: {:?}",
        page.console
    );
    assert_eq!(
        html.attr("data-ready"),
        Some("1"),
        "the page's script did not finish"
    );
    assert!(page.console.is_empty(), "console: {:?}", page.console);
    assert_eq!(dom.external_references(), Vec::<String>::new());
    dom
}

/// The data the page embeds (`<script type="application/json" id="stampede-data">`), parsed.
pub fn embedded_data(dom: &Dom) -> serde_json::Value {
    let embedded = dom
        .by_id("stampede-data")
        .expect("the embedded #stampede-data");
    assert_eq!(embedded.attr("type"), Some("application/json"));
    serde_json::from_str(&embedded.text()).expect("the embedded data is JSON")
}

/// The page's charts (`<figure class="chart" data-chart="NAME">`), named, in order.
pub fn charts<'a>(dom: &'a Dom) -> Vec<(&'a str, El<'a>)> {
    dom.elements()
        .into_iter()
        .filter(|e| e.name() == "figure" && e.has_class("chart"))
        .map(|e| (e.attr("data-chart").unwrap_or(""), e))
        .collect()
}

/// Asserts that chart `name` is drawn, or marked `empty` and saying why (no `<svg>`, a caption);
/// returns the points drawn (none for an empty chart). Drawn is the page contract's: one `<svg>`,
/// points `data-v="X Y"` (values, not pixels, finite numbers) inside a series `<g data-n="NAME">`.
pub fn assert_drawn(name: &str, chart: El) -> Vec<(f64, f64)> {
    assert!(!name.is_empty(), "a chart without its data-chart name");
    if chart.has_class("empty") {
        assert!(
            chart.all("svg").is_empty() && !chart.text().trim().is_empty(),
            "the empty chart {name} must say why, and draw nothing"
        );
        return Vec::new();
    }
    assert_eq!(chart.all("svg").len(), 1, "chart {name} holds one <svg>");
    let series = chart
        .descendants()
        .into_iter()
        .filter(|e| e.name() == "g" && e.attr("data-n").is_some());
    let points: Vec<(f64, f64)> = series
        .flat_map(|g| g.descendants())
        .filter_map(|e| e.attr("data-v"))
        .map(|v| {
            let xy: Vec<f64> = v
                .split_whitespace()
                .map(|n| {
                    n.parse()
                        .unwrap_or_else(|_| panic!("chart {name}: data-v=\"{v}\" is not numbers"))
                })
                .collect();
            assert!(
                xy.len() == 2 && xy.iter().all(|n: &f64| n.is_finite()),
                "chart {name}: data-v=\"{v}\" is not X Y"
            );
            (xy[0], xy[1])
        })
        .collect();
    assert!(!points.is_empty(), "chart {name} draws no data");
    points
}

/// The Chromium to use: `STAMPEDE_CHROMIUM`, else `chromium` or `chromium-browser` on PATH; the
/// error says why none.
pub fn find() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("STAMPEDE_CHROMIUM") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("STAMPEDE_CHROMIUM={} is not a file", p.display()))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let p = dir.join(name);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err("no chromium or chromium-browser on PATH (apt-get install chromium)".into())
}

/// The Chromium a browser test should use, or none: then it prints why and the test passes as
/// skipped, except under CI=true, where a missing browser fails it.
pub fn available(test: &str) -> Option<PathBuf> {
    match find() {
        Ok(p) => Some(p),
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{test}: {why}; CI=true requires Chromium for the browser tests")
        }
        Err(why) => {
            eprintln!("SKIPPED {test}: {why} (set CI=true to make this a failure)");
            None
        }
    }
}

/// The flags every run of Chromium gets: headless, a profile of its own (so tests in parallel do
/// not share one), none of its own traffic, and no host name resolved.
fn command(chromium: &Path, profile: &Path) -> Command {
    let mut cmd = Command::new(chromium);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--host-resolver-rules=MAP * ~NOTFOUND",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .stdin(Stdio::null());
    cmd
}

/// Opens `page` (a file) in Chromium and returns its DOM after the script ran and its console.
/// An error says what went wrong (Chromium failed, or did not finish in a minute).
pub fn load(chromium: &Path, page: &Path) -> Result<Loaded, String> {
    let page = page
        .canonicalize()
        .map_err(|e| format!("{}: {e}", page.display()))?;
    let profile = tempfile::tempdir().map_err(|e| format!("a profile directory: {e}"))?;
    let mut cmd = command(chromium, profile.path());
    cmd.args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(format!("file://{}", page.display()));
    let (status, stdout, stderr) = run_bounded(cmd)?;
    if !status.success() {
        return Err(format!("chromium exited {status}: {}", tail(&stderr, 2000)));
    }
    Ok(Loaded {
        html: stdout,
        console: console_messages(&stderr),
    })
}

/// Opens `page` in a frame of a page of ours and, once both have loaded, runs `script` on it: the
/// body of a JavaScript function of the framed page's `doc` and `win` that returns a JSON value
/// (what a person's clicks and pointer did, say). Returns that value (an exception thrown becomes
/// `{"exception": "..."}`) and the console of both pages. Chromium is allowed to let a file:// page
/// read another (`--allow-file-access-from-files`), and only here.
pub fn interact(
    chromium: &Path,
    page: &Path,
    script: &str,
) -> Result<(serde_json::Value, Vec<String>), String> {
    let page = page
        .canonicalize()
        .map_err(|e| format!("{}: {e}", page.display()))?;
    let frame_dir = tempfile::tempdir().map_err(|e| format!("a frame directory: {e}"))?;
    let frame = frame_dir.path().join("frame.html");
    let src = serde_json::to_string(&format!("file://{}", page.display())).expect("a string");
    let html = format!(
        "<!DOCTYPE html><html><body>\
         <iframe id=\"page\" style=\"width:1200px;height:900px;border:0\"></iframe><pre id=\"out\"></pre>\
         <script>var f=document.getElementById('page');\
         window.addEventListener('load',function(){{var out;\
         try{{out=(function(doc,win){{{script}}})(f.contentDocument,f.contentWindow)}}\
         catch(e){{out={{exception:String(e)}}}}\
         document.getElementById('out').textContent=JSON.stringify(out===undefined?null:out)}});\
         f.src={src};</script></body></html>"
    );
    std::fs::write(&frame, html).map_err(|e| format!("{}: {e}", frame.display()))?;
    let profile = tempfile::tempdir().map_err(|e| format!("a profile directory: {e}"))?;
    let mut cmd = command(chromium, profile.path());
    cmd.args([
        "--allow-file-access-from-files",
        "--enable-logging=stderr",
        "--v=0",
        "--dump-dom",
    ])
    .arg(format!("file://{}", frame.display()));
    let (status, stdout, stderr) = run_bounded(cmd)?;
    if !status.success() {
        return Err(format!("chromium exited {status}: {}", tail(&stderr, 2000)));
    }
    let out = Dom::parse(&stdout)
        .by_id("out")
        .map(|e| e.text())
        .unwrap_or_default();
    let value = serde_json::from_str(&out)
        .map_err(|e| format!("the frame's script left no result ({e}): {out:?}"))?;
    Ok((value, console_messages(&stderr)))
}

/// Runs `cmd` in a process group of its own, reading its output as it comes, and kills the whole
/// group (Chromium's renderer and GPU processes too) if it has not finished within [`PAGE_TIME`].
fn run_bounded(mut cmd: Command) -> Result<(std::process::ExitStatus, String, String), String> {
    use std::os::unix::process::CommandExt;
    let mut child = cmd
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start chromium: {e}"))?;
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = r.read_to_end(&mut b);
            String::from_utf8_lossy(&b).into_owned()
        })
    };
    let out = reader(Box::new(child.stdout.take().expect("piped stdout")));
    let err = reader(Box::new(child.stderr.take().expect("piped stderr")));
    let began = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        if began.elapsed() > PAGE_TIME {
            // SAFETY: kill(2) on the group this function created; no memory is involved.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            return Err(format!(
                "chromium did not finish within {PAGE_TIME:?}: {}",
                tail(&err.join().unwrap_or_default(), 2000)
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    Ok((status, stdout, stderr))
}

/// The page's console messages in Chromium's log: `[…:INFO:CONSOLE:7] "message", source: URL (7)`
/// (older builds write `CONSOLE(7)`).
fn console_messages(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(|l| l.split_once("] ").map_or(l, |(_, m)| m).to_string())
        .collect()
}

fn tail(s: &str, n: usize) -> &str {
    let start = s.len().saturating_sub(n);
    let start = (start..s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    &s[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_lines_are_told_from_chromiums_own() {
        let log = "[1:1:1201/144404.96:ERROR:dbus/bus.cc:405] Failed to connect to the bus\n\
                   [1:1:1201/144404.96:INFO:CONSOLE:1] \"boom\", source: file:///tmp/a.html (1)\n\
                   [1:1:1201/144404.96:INFO:CONSOLE(3)] \"Uncaught ReferenceError: x\", source: file:///tmp/a.html (3)\n";
        assert_eq!(
            console_messages(log),
            [
                "\"boom\", source: file:///tmp/a.html (1)",
                "\"Uncaught ReferenceError: x\", source: file:///tmp/a.html (3)"
            ]
        );
    }
}
