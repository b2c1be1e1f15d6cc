//! Chromium headless as a reader of our pages: the DOM after the page's script ran
//! (`--dump-dom`) and what the page said on the console. Chromium is told to resolve no host name,
//! so neither it nor a page can reach anything beyond this machine.
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

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

/// steps.tsv of a results directory as (header, rows of cells).
pub fn steps_tsv(dir: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(dir.join("steps.tsv")).expect("steps.tsv");
    let mut lines = text
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect::<Vec<String>>());
    let header = lines.next().expect("a header line");
    (header, lines.collect())
}

/// Asserts that a run's page embeds its results directory's numbers (`stampede.report-data/1`, the
/// contract in `report/src/lib.rs`): what ran as run.json says; each step it shows as run.json and
/// steps.tsv have it, every steps.tsv column its cell (a number where the cell is one); each
/// agent's share of those steps as run.json's `steps[].agents[]`. A page may show fewer steps than
/// the files hold (a run killed between their writes: steps.tsv, run.json, then the page); returns
/// how many it shows.
pub fn assert_embeds_run(data: &Value, dir: &Path) -> usize {
    let run = crate::run_json(dir);
    assert_eq!(data["schema"], "stampede.report-data/1");
    for key in ["target", "label", "status"] {
        assert_eq!(data[key], run[key], "the page's {key} is run.json's");
    }
    assert_eq!(data["model"], run["plan"]["model"]);
    let names: Vec<Value> = array(&run["agents"])
        .iter()
        .map(|a| a["name"].clone())
        .collect();
    assert_eq!(
        data["agents"],
        Value::from(names.clone()),
        "the agents' names"
    );
    let steps = &run["steps"];
    let shown = assert_steps_columns(&data["steps"], steps, dir);
    assert_agent_columns(&data["agent_steps"], &array(steps)[..shown], &names);
    shown
}

fn array(v: &Value) -> &Vec<Value> {
    v.as_array().unwrap_or_else(|| panic!("an array, not {v}"))
}

/// The column `name` of a set of columns.
fn column<'a>(cols: &'a Value, name: &str) -> &'a Vec<Value> {
    cols[name]
        .as_array()
        .unwrap_or_else(|| panic!("no column {name} in {cols}"))
}

/// The page's `steps` columns against run.json's `steps` and steps.tsv; returns how many steps
/// they hold.
fn assert_steps_columns(cols: &Value, steps: &Value, dir: &Path) -> usize {
    let (header, rows) = steps_tsv(dir);
    let mut names: Vec<&str> = cols
        .as_object()
        .expect("steps: an object of columns")
        .keys()
        .map(String::as_str)
        .collect();
    let mut want: Vec<&str> = ["step", "step_value"]
        .into_iter()
        .chain(header.iter().map(String::as_str))
        .collect();
    names.sort_unstable();
    want.sort_unstable();
    assert_eq!(
        names, want,
        "the steps' columns: step, step_value, steps.tsv's"
    );
    let shown = column(cols, "step").len();
    for name in &names {
        assert_eq!(column(cols, name).len(), shown, "column {name}'s length");
    }
    let steps = array(steps);
    assert!(
        shown <= steps.len() && shown <= rows.len(),
        "{shown} steps shown, run.json has {}, steps.tsv {}",
        steps.len(),
        rows.len()
    );
    for (i, (step, row)) in steps.iter().zip(&rows).take(shown).enumerate() {
        assert_eq!(column(cols, "step")[i], step["step"], "step {i}'s number");
        let value = column(cols, "step_value")[i]
            .as_f64()
            .expect("a step value");
        let want = step["step_value"].as_f64().expect("run.json's step value");
        assert!((value - want).abs() < 5e-4, "step {i}: {value} for {want}");
        for (name, cell) in header.iter().zip(row) {
            let got = &column(cols, name)[i];
            match cell.parse::<f64>() {
                Ok(n) if n.is_finite() => assert_eq!(
                    got.as_f64(),
                    Some(n),
                    "step {i} {name}: {got} for steps.tsv's number {cell}"
                ),
                _ => assert_eq!(got, cell, "step {i} {name}: {got} for steps.tsv's {cell:?}"),
            }
        }
    }
    shown
}

/// The page's `agent_steps` columns against run.json's `steps[].agents[]`, `agent` an index into
/// the agents' `names`.
fn assert_agent_columns(cols: &Value, steps: &[Value], names: &[Value]) {
    let mut k = 0;
    for step in steps {
        for share in array(&step["agents"]) {
            let at = |name: &str| &column(cols, name)[k];
            let agent = match at("agent") {
                Value::Number(n) => &names[n.as_u64().expect("an index") as usize],
                name => name,
            };
            assert_eq!(agent, &share["agent"], "row {k}'s agent");
            assert_eq!(at("step"), &step["step"], "row {k}'s step");
            for c in ["threads", "requests", "replies", "ok", "errors"] {
                assert_eq!(at(c), &share[c], "row {k}'s {c}");
            }
            let bounds: Vec<&str> = array(&share["latency_ms"]["lower_bound"])
                .iter()
                .map(|b| b.as_str().expect("a percentile's name"))
                .collect();
            assert_eq!(
                at("lower_bound"),
                &bounds.join(" "),
                "row {k}'s lower bounds"
            );
            let p99 = at("p99_ms").as_f64().expect("a p99");
            let want = share["latency_ms"]["p99"].as_f64().expect("run.json's p99");
            assert!((p99 - want).abs() < 5e-4, "row {k}: p99 {p99} for {want}");
            k += 1;
        }
    }
    assert_eq!(column(cols, "agent").len(), k, "one row per step and agent");
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
/// points as `<path d="M…" data-v="X Y,X Y,…">` (values, not pixels, finite numbers) inside a
/// series `<g data-n="NAME">`, one "X Y" for each `M` of the path; and a marker (`path.mk`) is drawn
/// where its values are, by the axis mappings its `<svg data-x>` and plot `<g data-y>` carry.
pub fn assert_drawn(name: &str, chart: El) -> Vec<(f64, f64)> {
    assert!(!name.is_empty(), "a chart without its data-chart name");
    if chart.has_class("empty") {
        assert!(
            chart.all("svg").is_empty() && !chart.text().trim().is_empty(),
            "the empty chart {name} must say why, and draw nothing"
        );
        return Vec::new();
    }
    let svg = chart.all("svg");
    assert_eq!(svg.len(), 1, "chart {name} holds one <svg>");
    let series = chart
        .descendants()
        .into_iter()
        .filter(|e| e.name() == "g" && e.attr("data-n").is_some());
    let points: Vec<(f64, f64)> = series
        .flat_map(|g| g.descendants())
        .filter(|e| e.attr("data-v").is_some())
        .flat_map(|e| path_points(name, e))
        .map(|(value, _)| value)
        .collect();
    assert!(!points.is_empty(), "chart {name} draws no data");
    let x = Mapping::of(name, svg[0], "data-x");
    for plot in chart.all("g").into_iter().filter(|g| g.has_class("plot")) {
        let y = Mapping::of(name, plot, "data-y");
        let markers = plot.all("path").into_iter().filter(|p| p.has_class("mk"));
        for ((vx, vy), (px, py)) in markers.flat_map(|p| path_points(name, p)) {
            assert!(
                x.near(vx, px) && y.near(vy, py),
                "chart {name}: the marker of ({vx}, {vy}) is drawn at ({px}, {py}), not at ({}, {})",
                x.px(vx),
                y.px(vy)
            );
        }
    }
    points
}

/// "X Y": two finite numbers.
fn pair(s: &str) -> Option<(f64, f64)> {
    let xy: Vec<f64> = s
        .split(' ')
        .map(|n| n.parse().ok())
        .collect::<Option<_>>()?;
    match xy[..] {
        [x, y] if x.is_finite() && y.is_finite() => Some((x, y)),
        _ => None,
    }
}

/// The points of a `<path d="M…" data-v="X Y,X Y,…">`: each `data-v` pair (the values) with where
/// the `M` of its place moves to (the pixel).
fn path_points(chart: &str, path: El) -> Vec<((f64, f64), (f64, f64))> {
    let v = path.attr("data-v").unwrap_or("");
    let d = path.attr("d").unwrap_or_else(|| {
        panic!(
            "chart {chart}: data-v=\"{v}\" on a <{}> without d",
            path.name()
        )
    });
    let values: Vec<(f64, f64)> = v
        .split(',')
        .map(|p| {
            pair(p).unwrap_or_else(|| {
                panic!("chart {chart}: \"{p}\" of data-v=\"{v}\" is not X Y, finite numbers")
            })
        })
        .collect();
    let moves: Vec<(f64, f64)> = d
        .split('M')
        .skip(1)
        .map(|m| {
            // "M x y" ends where the next command's letter starts.
            let at = m
                .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == ' '))
                .next()
                .unwrap_or("");
            pair(at).unwrap_or_else(|| {
                panic!("chart {chart}: the move \"M{m}\" of d=\"{d}\" is not to X Y")
            })
        })
        .collect();
    assert_eq!(
        values.len(),
        moves.len(),
        "chart {chart}: data-v=\"{v}\" has not one X Y per M of d=\"{d}\""
    );
    values.into_iter().zip(moves).collect()
}

/// An axis' mapping of values to pixels as a chart writes it for its script: `SCALE LO HI FROM TO`,
/// the scale `l`inear, lo`g` or `p`ercentile (x = 1/(1-q)), its ends transformed.
#[derive(Debug)]
struct Mapping {
    scale: char,
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl Mapping {
    /// `el`'s mapping in attribute `attr`.
    fn of(chart: &str, el: El, attr: &str) -> Mapping {
        let text = el.attr(attr).unwrap_or("");
        let parts: Vec<&str> = text.split(' ').collect();
        let n: Option<Vec<f64>> = parts.iter().skip(1).map(|n| n.parse().ok()).collect();
        match (parts.first().copied(), n.as_deref()) {
            (Some(s @ ("l" | "g" | "p")), Some(&[lo, hi, from, to])) => Mapping {
                scale: s.chars().next().unwrap_or('l'),
                lo,
                hi,
                from,
                to,
            },
            _ => panic!("chart {chart}: {attr}=\"{text}\" is not an axis mapping"),
        }
    }

    /// The pixel of `v`; a value off the axis sits at its end.
    fn px(&self, v: f64) -> f64 {
        let t = match self.scale {
            'g' if v > 0.0 => v.log10(),
            'g' => self.lo,
            'p' => -(1.0 - v.clamp(0.0, 1.0)).log10(),
            _ => v,
        };
        let t = t.clamp(self.lo.min(self.hi), self.lo.max(self.hi));
        self.from + (t - self.lo) / (self.hi - self.lo) * (self.to - self.from)
    }

    /// Whether pixel `px` is where `v` goes: coordinates are written to a tenth of a pixel, and
    /// values to three significant digits (a quantile to seven decimals).
    fn near(&self, v: f64, px: f64) -> bool {
        let off = [v * 0.995 - 1e-7, v * 1.005 + 1e-7]
            .iter()
            .map(|w| (self.px(*w) - self.px(v)).abs())
            .fold(0.0, f64::max);
        (self.px(v) - px).abs() <= 0.06 + off
    }
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
    dump_dom(chromium, &format!("file://{}", page.display()), &[])
}

/// The DOM of `url` once loaded, and the page's console, Chromium given `extra` switches too.
fn dump_dom(chromium: &Path, url: &str, extra: &[String]) -> Result<Loaded, String> {
    let profile = tempfile::tempdir().map_err(|e| format!("a profile directory: {e}"))?;
    let mut cmd = command(chromium, profile.path());
    cmd.args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .args(extra)
        .arg(url);
    let (status, stdout, stderr) = run_bounded(cmd)?;
    if !status.success() {
        return Err(format!("chromium exited {status}: {}", tail(&stderr, 2000)));
    }
    Ok(Loaded {
        html: stdout,
        console: console_messages(&stderr),
    })
}

/// Still no host name resolved, but the loopback address a test serves its page on reached (the
/// last of Chromium's switches given twice is the one it takes).
const LOOPBACK_ONLY: &str = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1";

/// Opens `url` (a page this test serves on loopback) in Chromium and returns its DOM once loaded,
/// after `wait` more of its script's time (`--virtual-time-budget`), and its console.
pub fn load_url(chromium: &Path, url: &str, wait: Option<Duration>) -> Result<Loaded, String> {
    let mut extra = vec![LOOPBACK_ONLY.to_string()];
    if let Some(w) = wait {
        extra.push(format!("--virtual-time-budget={}", w.as_millis()));
    }
    dump_dom(chromium, url, &extra)
}

/// A screenshot of `url` (a file:// page or one served on loopback), `width` × `height` pixels, into
/// `png`: for a person to look at.
pub fn screenshot(
    chromium: &Path,
    url: &str,
    png: &Path,
    width: u32,
    height: u32,
) -> Result<(), String> {
    let profile = tempfile::tempdir().map_err(|e| format!("a profile directory: {e}"))?;
    let mut cmd = command(chromium, profile.path());
    cmd.arg(format!("--screenshot={}", png.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg("--hide-scrollbars")
        .arg(LOOPBACK_ONLY)
        .arg(url);
    let (status, _, stderr) = run_bounded(cmd)?;
    if !status.success() || !png.is_file() {
        return Err(format!("chromium exited {status}: {}", tail(&stderr, 2000)));
    }
    Ok(())
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

    /// A chart of x 0..10 over pixels 0..100 and y 0..10 over 100..0 (linear, or y on decades
    /// 1..100), holding `path`.
    fn chart(y: &str, path: &str) -> Dom {
        Dom::parse(&format!(
            "<figure class=\"chart\" data-chart=\"c\"><svg data-x=\"l 0 10 0 100\">\
             <g class=\"plot lin\" data-y=\"{y}\"><g data-s=\"0\" data-n=\"a\">{path}</g></g></svg></figure>"
        ))
    }

    fn drawn(y: &str, path: &str) -> Vec<(f64, f64)> {
        let dom = chart(y, path);
        assert_drawn("c", dom.first("figure").unwrap())
    }

    #[test]
    fn a_paths_values_are_one_pair_per_move() {
        let markers = r#"<path class="mk" d="M10 90h0M50 50h0M-0 100m-3 0a3 3 0 1 0 6 0" data-v="1 1,5 5,0 0"/>"#;
        assert_eq!(
            drawn("l 0 10 100 0", markers),
            [(1.0, 1.0), (5.0, 5.0), (0.0, 0.0)]
        );
        // On decades 1..100, 10 is half way up; a 0 sits at the axis' foot.
        let log = r#"<path class="mk" d="M20 50h0M30 100h0" data-v="2 10,3 0"/>"#;
        assert_eq!(drawn("g 0 2 100 0", log), [(2.0, 10.0), (3.0, 0.0)]);
        // A bar is drawn from the middle of its top, not at its x: only its count is checked.
        let bar = r#"<path d="M12 50h3V100h-6V50z" data-v="1 5"/>"#;
        assert_eq!(drawn("l 0 10 100 0", bar), [(1.0, 5.0)]);
    }

    #[test]
    #[should_panic(expected = "has not one X Y per M")]
    fn a_value_without_its_move_is_refused() {
        drawn(
            "l 0 10 100 0",
            r#"<path class="mk" d="M10 90h0" data-v="1 1,5 5"/>"#,
        );
    }

    #[test]
    #[should_panic(expected = "is not X Y, finite numbers")]
    fn a_value_not_a_number_is_refused() {
        drawn(
            "l 0 10 100 0",
            r#"<path class="mk" d="M10 90h0" data-v="1 NaN"/>"#,
        );
    }

    #[test]
    #[should_panic(expected = "the marker of (5, 5) is drawn at (10, 90)")]
    fn a_marker_away_from_its_values_is_refused() {
        drawn(
            "l 0 10 100 0",
            r#"<path class="mk" d="M10 90h0M50 50h0" data-v="5 5,1 1"/>"#,
        );
    }

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
