//! The run's files: the step table (TSV/CSV), run.json, report.html, and per step an HdrHistogram
//! interval log and its merged percentile distribution (`.hgrm`). Each is written as its step
//! finishes, so a killed run keeps every finished step.
use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use monitor::MonitorInfo;
use results::distribution::Distribution;
use results::events::{End, Event};
pub use results::run_file::AgentInfo;
use results::run_file::{Breach, RunFile, RunStatus, Stopped};
use results::step::{RunSummary, StepResult};
use results::table::StepTable;
use shared::histogram::{Deflater, Encoded, Merger};

use crate::config::RunConfig;
use crate::report_file::{self, REPORT};

#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}: {source}")]
pub struct OutputError {
    pub path: PathBuf,
    pub source: io::Error,
}

fn at(path: &Path) -> impl FnOnce(io::Error) -> OutputError + '_ {
    move |source| OutputError {
        path: path.to_path_buf(),
        source,
    }
}

/// One interval's latency for the .hlog: each agent's histogram as it arrived (checked V2 bytes, small),
/// merged only while the file is written, so a long step does not hold full histograms in memory. The
/// writer takes them one at a time (see [`write_hlog`]), so a long step need not hold them all either.
#[derive(Debug)]
pub struct HlogInterval {
    pub offset: Duration,
    pub length: Duration,
    /// (agent index into the tags given to [`write_hlog`], its histogram), in arrival order.
    pub per_agent: Vec<(usize, Encoded)>,
}

pub struct Output {
    dir: PathBuf,
    table: File,
    table_path: PathBuf,
    columns: StepTable,
    separator: char,
    json_path: PathBuf,
    doc: RunFile,
    /// Where the status value starts in run.json as last written, for [`Output::finish`]'s
    /// in-place fallback.
    status_at: Option<u64>,
    /// The table's length before the row of a step run.json does not hold yet: a step whose
    /// run.json cannot be written is taken back out of the table, so the two always agree.
    unsummarized: Option<u64>,
    /// Where what run.json gains is told as it is written (the live page, events.ndjson), as the
    /// run's target number `target`, and how many of its steps have been told.
    feed: crate::live::Feed,
    target: usize,
    told: usize,
}

/// Why a run cannot have its output directory.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("output directory {path} is not writable: {source}")]
    Unwritable { path: PathBuf, source: io::Error },
    #[error(
        "output directory {path} holds another run's files ({files}): give another --out, or add --force to replace them"
    )]
    Occupied { path: PathBuf, files: String },
}

/// How many stamped names (`STAMP`, `STAMP-2`, ...) a default directory tries before giving up.
const FRESH_TRIES: u32 = 1000;

/// run.json before the run has agents: it claims the directory (created exclusively, so two runs
/// cannot both take it), and is removed by [`release`] if the run ends before [`Output::create`].
const CLAIM: &[u8] = b"{\"status\": \"starting\"}\n";
/// The claim of a directory this run made (a fresh stamped name, or a given one that did not exist):
/// [`release`] removes the directory too, so a run that never started leaves none behind.
const CLAIM_MADE: &[u8] = b"{\"status\": \"starting\", \"made\": true}\n";

/// Whether run.json's bytes are a claim alone, and whether the run made its directory.
fn claimed(json: &Path) -> Option<bool> {
    match fs::read(json).ok()?.as_slice() {
        b if b == CLAIM => Some(false),
        b if b == CLAIM_MADE => Some(true),
        _ => None,
    }
}

/// Takes the run's output directory and checks up front that results can be written, so a long run
/// never ends in a lost result. `fresh`: `dir` is the default stamped name, and the run takes the
/// first name from it that no other run has (runs started in the same second get `-2`, `-3`, ...).
/// Otherwise `dir` may exist, but one that holds another run's files is refused, or with `force`
/// those files are removed, so nothing of the old run remains beside the new one.
pub fn claim(dir: &Path, fresh: bool, force: bool) -> Result<PathBuf, DirError> {
    let unwritable = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DirError::Unwritable { path, source }
    };
    let made = fresh || !dir.exists();
    let dir = if fresh {
        fresh_dir(dir).map_err(unwritable(dir))?
    } else {
        fs::create_dir_all(dir).map_err(unwritable(dir))?;
        let old = run_files(dir).map_err(unwritable(dir))?;
        if !old.is_empty() && !force {
            return Err(occupied(dir, &old));
        }
        for f in &old {
            fs::remove_file(f).map_err(unwritable(f))?;
        }
        dir.to_path_buf()
    };
    fs::create_dir_all(dir.join("hlog")).map_err(unwritable(&dir))?;
    let json = dir.join("run.json");
    let mut f = match OpenOptions::new().write(true).create_new(true).open(&json) {
        Ok(f) => f,
        // Another run took it between the look and now.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(occupied(&dir, &[json]));
        }
        Err(e) => return Err(unwritable(&dir)(e)),
    };
    f.write_all(if made { CLAIM_MADE } else { CLAIM })
        .map_err(unwritable(&dir))?;
    Ok(dir)
}

/// The files a side-by-side run writes beside its targets' directories.
pub const BESIDE_FILES: [&str; 3] = ["compare.html", "compare.tsv", "compare.json"];
/// What the live feed writes beside them (the run's events and its page).
const BESIDE_LIVE: [&str; 2] = [crate::live::EVENTS_FILE, crate::live::PAGE_FILE];

/// Takes the directory of a side-by-side run, which holds one directory per target (each then taken
/// by [`claim`]) and the comparison. A default stamped `dir` takes the first free name, as a run's
/// does; a given one that holds another comparison, or a run's own files, is refused unless `force`,
/// which removes them.
pub fn claim_beside(dir: &Path, fresh: bool, force: bool) -> Result<PathBuf, DirError> {
    let unwritable = |source| DirError::Unwritable {
        path: dir.to_path_buf(),
        source,
    };
    if fresh {
        return fresh_dir(dir).map_err(unwritable);
    }
    fs::create_dir_all(dir).map_err(unwritable)?;
    let mut old: Vec<PathBuf> = BESIDE_FILES
        .iter()
        .chain(&BESIDE_LIVE)
        .map(|f| dir.join(f))
        .filter(|p| p.is_file())
        .collect();
    old.extend(run_files(dir).map_err(unwritable)?);
    if !old.is_empty() && !force {
        return Err(occupied(dir, &old));
    }
    for f in &old {
        fs::remove_file(f).map_err(|source| DirError::Unwritable {
            path: f.clone(),
            source,
        })?;
    }
    Ok(dir.to_path_buf())
}

/// Undoes [`claim`] for a run that ended before writing anything: its run.json would say nothing.
/// A run that never started leaves no results directory: the empty `hlog/` goes, and the directory
/// itself when the run made it and nothing else is in it (`remove_dir` takes only an empty one).
pub fn release(dir: &Path) {
    let json = dir.join("run.json");
    let Some(made) = claimed(&json) else {
        return;
    };
    let _ = fs::remove_file(json);
    // A run that never got its agents leaves nothing that would hold the directory.
    for f in [crate::live::EVENTS_FILE, crate::live::PAGE_FILE] {
        let _ = fs::remove_file(dir.join(f));
    }
    let _ = fs::remove_dir(dir.join("hlog"));
    if made {
        let _ = fs::remove_dir(dir);
    }
}

/// How many steps the run.json in `dir` holds, as it is on disk now (none where it cannot be read).
pub fn kept_steps(dir: &Path) -> usize {
    fs::read_to_string(dir.join("run.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|doc| doc["steps"].as_array().map(Vec::len))
        .unwrap_or(0)
}

/// For a run interrupted before its first step: its claim's run.json says `aborted`, and why.
pub fn mark_interrupted(dir: &Path) {
    let json = dir.join("run.json");
    if claimed(&json).is_some() {
        let doc = "{\"status\": \"aborted\", \"why\": \"interrupted before the first step: no load was sent\"}\n";
        let _ = fs::write(json, doc);
    }
}

/// Ends the run.json in `dir` that a run left unfinished, whatever stopped it (an error before its
/// targets could finish, a panic): a claim alone (`starting`) is removed as [`release`] does; a file
/// still `running` is marked `failed`, ended now, with `why` among its warnings. A finished file is
/// left as it is. Best effort: it runs while the run goes away, and has nobody to tell.
pub fn fail_unfinished(dir: &Path, why: &str) {
    release(dir);
    let json = dir.join("run.json");
    let Ok(text) = fs::read_to_string(&json) else {
        return;
    };
    let Ok(mut doc) = serde_json::from_str::<serde_json::Value>(&text) else {
        return;
    };
    if doc["status"] != RunStatus::Running.name() {
        return;
    }
    doc["status"] = RunStatus::Failed.name().into();
    doc["finished_at"] = now().into();
    if let Some(w) = doc["warnings"].as_array_mut() {
        w.push(format!("the run failed: {why}").into());
    }
    let Ok(text) = serde_json::to_string_pretty(&doc) else {
        return;
    };
    let _ = replace(&json, &json.with_extension("json.tmp"), |mut f| {
        f.write_all(text.as_bytes())
            .and_then(|()| f.write_all(b"\n"))
            .and_then(|()| f.sync_data())
            .map_err(at(&json))
    });
}

/// Creates the first free name of `STAMP`, `STAMP-2`, ...: `create_dir` fails on an existing name,
/// so two runs can never take the same one.
fn fresh_dir(base: &Path) -> io::Result<PathBuf> {
    if let Some(parent) = base.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    let mut last = None;
    for n in 1..=FRESH_TRIES {
        let name = if n == 1 {
            base.to_path_buf()
        } else {
            let mut s = base.as_os_str().to_owned();
            s.push(format!("-{n}"));
            PathBuf::from(s)
        };
        match fs::create_dir(&name) {
            Ok(()) => return Ok(name),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::ErrorKind::AlreadyExists.into()))
}

/// The files in `dir` that a run writes (its own, or one left half-written by a killed run).
fn run_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut found: Vec<PathBuf> = [
        "run.json",
        "run.json.tmp",
        "steps.tsv",
        "steps.csv",
        REPORT,
        "report.html.tmp",
        crate::live::EVENTS_FILE,
        crate::live::PAGE_FILE,
    ]
    .iter()
    .map(|f| dir.join(f))
    .filter(|p| p.is_file())
    .collect();
    let hlog = dir.join("hlog");
    if hlog.is_dir() {
        let mut logs = Vec::new();
        for entry in fs::read_dir(&hlog)? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let ours = [".hlog", ".hlog.tmp", ".hgrm", ".hgrm.tmp"];
            if name.starts_with("step-") && ours.iter().any(|end| name.ends_with(end)) {
                logs.push(path);
            }
        }
        logs.sort();
        found.extend(logs);
    }
    Ok(found)
}

fn occupied(dir: &Path, files: &[PathBuf]) -> DirError {
    const NAMED: usize = 4;
    let mut names: Vec<String> = files
        .iter()
        .take(NAMED)
        .map(|f| f.strip_prefix(dir).unwrap_or(f).display().to_string())
        .collect();
    if files.len() > NAMED {
        names.push(format!("{} more", files.len() - NAMED));
    }
    DirError::Occupied {
        path: dir.to_path_buf(),
        files: names.join(", "),
    }
}

/// How far [`Output::finish`] got.
#[derive(Debug)]
pub enum Finished {
    /// run.json was rewritten whole, with its status and end time.
    Whole,
    /// It could not be (the error says why; a full disk has no room for the copy beside it), so its
    /// status was written into the file on disk in place: everything else in it is from the last
    /// step written.
    StatusOnly(OutputError),
}

impl Output {
    /// `warnings` are the agents' warnings about the whole run (e.g. a source address they lack), each
    /// prefixed with its agent; `monitors` the server monitors that watch it (each gains its columns;
    /// the one paired with the target, by `cfg.pairing`, unsuffixed).
    pub fn create(
        cfg: &RunConfig,
        agents: &[AgentInfo],
        monitors: &[MonitorInfo],
        warnings: &[String],
    ) -> Result<Output, OutputError> {
        let dir = cfg.out.clone();
        let table_path = dir.join(cfg.format.file_name());
        let mut table = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&table_path)
            .map_err(at(&table_path))?;
        let sep = cfg.format.separator();
        let names: Vec<String> = monitors.iter().map(|m| m.name.clone()).collect();
        let search = cfg.echo.find_max.is_some();
        let paired = cfg.pairing.paired(cfg.label.as_deref(), &names);
        let tls = cfg.echo.tls_sessions.is_some();
        let columns = StepTable::of_run(&cfg.host, cfg.plan.model(), tls, search, &names, paired);
        let header = columns.header().join(&sep.to_string());
        writeln!(table, "{header}").map_err(at(&table_path))?;
        let mut doc = RunFile::start(
            now(),
            cfg.plan.workload().origin().origin().to_string(),
            cfg.echo.clone(),
            agents.to_vec(),
            warnings.to_vec(),
        );
        doc.label = cfg.label.clone();
        doc.monitors = monitors.to_vec();
        doc.paired_monitor = paired.map(str::to_string);
        let mut out = Output {
            dir,
            table,
            table_path,
            columns,
            separator: sep,
            json_path: cfg.out.join("run.json"),
            doc,
            status_at: None,
            unsummarized: None,
            feed: crate::live::Feed::off(),
            target: 0,
            told: 0,
        };
        out.write_json()?;
        out.write_report()?;
        Ok(out)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Tells `feed` this run (as target number `target`) from here on, starting with run.json as it stands.
    pub fn attach(&mut self, feed: &crate::live::Feed, target: usize) {
        self.feed = feed.clone();
        self.target = target;
        self.told = self.doc.steps.len();
        self.feed.emit(Event::Run {
            target,
            run: Box::new(self.doc.clone()),
        });
    }

    /// Where the run's steps are told as they run, and as which target.
    pub fn feed(&self) -> (&crate::live::Feed, usize) {
        (&self.feed, self.target)
    }

    /// Appends the step to the table, writes its hlog and .hgrm, durably, and appends it to run.json's
    /// steps, which are written with the summary that follows ([`Output::write_summary`]): run.json once
    /// per step. `agents` names the agents that `hlog` refers to by index; `hlog` is read as in
    /// [`write_hlog`]; `distribution` is the step's merged latency.
    pub fn write_step<E>(
        &mut self,
        r: &StepResult,
        started: SystemTime,
        hlog: impl IntoIterator<Item = Result<HlogInterval, E>>,
        agents: &[String],
        distribution: &Distribution,
    ) -> Result<(), OutputError>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        // The hlog and .hgrm first: a step is in the table only once run.json can follow it.
        write_hlog(&self.dir, r.number, started, hlog, agents)?;
        write_hgrm(&self.dir, distribution)?;
        let before = self.table.stream_position().map_err(at(&self.table_path))?;
        let row = self.columns.row(r).join(&self.separator.to_string());
        let written = writeln!(self.table, "{row}").and_then(|()| self.table.sync_data());
        if let Err(e) = written {
            self.take_back_row(before);
            return Err(at(&self.table_path)(e));
        }
        self.unsummarized = Some(before);
        self.doc.steps.push(r.clone());
        Ok(())
    }

    /// Records a planned run's warmup in run.json (its `warmup`), and writes it: no row of the
    /// table, no hlog or .hgrm, no summary, whose readers take every step they find as counted.
    pub fn record_warmup(&mut self, r: &StepResult) -> Result<(), OutputError> {
        self.doc.warmup = Some(r.clone());
        self.write_json()?;
        self.feed.emit(Event::Warmup {
            target: self.target,
            step: Box::new(r.clone()),
        });
        Ok(())
    }

    /// Truncates the table to `len`, where it was before a row run.json will not hold.
    fn take_back_row(&mut self, len: u64) {
        let _ = self
            .table
            .set_len(len)
            .and_then(|()| self.table.seek(SeekFrom::Start(len)).map(|_| ()))
            .and_then(|()| self.table.sync_data());
    }

    /// Puts the run's answer so far into run.json, and writes it (with the steps appended since),
    /// then report.html from it. A run.json that cannot be written takes the step it would have
    /// added back out of the table and of what run.json will say: both keep the steps before.
    pub fn write_summary(&mut self, summary: &RunSummary) -> Result<(), OutputError> {
        let before = self.doc.summary.replace(summary.clone());
        if let Err(e) = self.write_json() {
            if let Some(len) = self.unsummarized.take() {
                self.take_back_row(len);
                self.doc.steps.pop();
                self.doc.summary = before;
            }
            return Err(e);
        }
        self.unsummarized = None;
        for step in &self.doc.steps[self.told..] {
            self.feed.emit(Event::Step {
                target: self.target,
                step: Box::new(step.clone()),
                summary: Some(Box::new(summary.clone())),
            });
        }
        self.told = self.doc.steps.len();
        self.write_report()
    }

    /// Rewrites report.html (see [`write_report`]).
    pub fn write_report(&self) -> Result<(), OutputError> {
        write_report(&self.dir)
    }

    /// Records how the ramp ended: why it stopped early, and the --fail-on breaches (written with
    /// the finish).
    pub fn record_end(&mut self, stopped: Option<Stopped>, breaches: Vec<Breach>) {
        self.doc.stopped = Some(stopped);
        self.doc.fail_on = Some(breaches);
    }

    /// Records why the run failed, among run.json's warnings (written with the finish).
    pub fn record_failure(&mut self, why: &str) {
        self.doc.warnings.push(format!("the run failed: {why}"));
    }

    /// Records a search's answer (written with the finish).
    pub fn record_capacity(&mut self, capacity: Option<results::search::Capacity>) {
        self.doc.capacity = capacity;
    }

    /// Writes the run's final status and end time. Whatever else failed, run.json must not keep
    /// saying "running" after the process is gone: if the whole file cannot be rewritten, the status
    /// is overwritten in place in the bytes already on disk, which needs no new space.
    pub fn finish(&mut self, status: RunStatus) -> Result<Finished, OutputError> {
        self.doc.status = status;
        self.doc.finished_at = Some(now());
        let written = self.write_json();
        self.feed.emit(Event::End {
            target: self.target,
            end: Box::new(End::of(&self.doc)),
        });
        let whole = match written {
            Ok(()) => return Ok(Finished::Whole),
            Err(e) => e,
        };
        let offset = self.status_at.ok_or_else(|| OutputError {
            path: self.json_path.clone(),
            source: io::Error::other(format!("{} (and no run.json to mark)", whole.source)),
        })?;
        // In the room of `"running"`: a longer status ("completed") would not fit, and a run that
        // could not write its end has failed anyway.
        let room = RunStatus::Running.name().len() + 2;
        let patch = format!("{:<room$}", format!("\"{}\"", marked_in_place(status)));
        let mut f = OpenOptions::new()
            .write(true)
            .open(&self.json_path)
            .map_err(at(&self.json_path))?;
        f.seek(SeekFrom::Start(offset))
            .and_then(|_| f.write_all(patch.as_bytes()))
            .and_then(|()| f.sync_data())
            .map_err(at(&self.json_path))?;
        Ok(Finished::StatusOnly(whole))
    }

    /// Replaces run.json atomically: readers see the old or the new file, never half of one.
    fn write_json(&mut self) -> Result<(), OutputError> {
        let tmp = self.json_path.with_extension("json.tmp");
        let text = self.doc.to_json();
        replace(&self.json_path, &tmp, |mut f| {
            f.write_all(text.as_bytes())
                .and_then(|()| f.write_all(b"\n"))
                .and_then(|()| f.sync_data())
                .map_err(at(&tmp))
        })?;
        // The top-level key is the only one indented by two spaces.
        let key = "\n  \"status\": ";
        self.status_at = (self.doc.status == RunStatus::Running)
            .then(|| text.find(key).map(|i| (i + key.len()) as u64))
            .flatten();
        Ok(())
    }
}

/// The status a run.json marked in place says: the status itself when it fits in the room of
/// `"running"`, else `failed` (a run that could not write its end has failed anyway).
pub fn marked_in_place(status: RunStatus) -> RunStatus {
    if status.name().len() <= RunStatus::Running.name().len() {
        status
    } else {
        RunStatus::Failed
    }
}

/// The wall clock as run.json writes it.
pub fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// Writes `dir/hlog/step-NNN.hlog`: per interval, the fleet's merged latency (untagged), then each
/// agent's (tagged with its name from `agents`). One scratch histogram is reused for every line, so
/// writing costs one histogram's memory however many agents there are. `intervals` are taken one at a
/// time, so they may be read from elsewhere as they are written; a failure to get one fails the file,
/// the message naming the file and then the cause.
pub fn write_hlog<E>(
    dir: &Path,
    step: u32,
    started: SystemTime,
    intervals: impl IntoIterator<Item = Result<HlogInterval, E>>,
    agents: &[String],
) -> Result<(), OutputError>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let path = dir.join("hlog").join(format!("step-{step:03}.hlog"));
    // Streamed to a file beside it, not built in memory (the log of a minute of 1,000 agents is
    // tens of MB), then renamed over it: a reader sees the whole file or none.
    replace(&path, &path.with_extension("hlog.tmp"), |file| {
        let mut out = io::BufWriter::new(file);
        hlog_lines(&mut out, &path, step, started, intervals, agents)?;
        out.flush().map_err(at(&path))
    })
}

/// Rewrites `dir/report.html` from the run's files as they are on disk now (run.json, the steps'
/// distributions), as `stampede report` would: the page a run leaves is the one rebuilt from its
/// files. Replaced atomically, so a browser refreshing it mid-run never reads half a page.
pub fn write_report(dir: &Path) -> Result<(), OutputError> {
    let path = dir.join(REPORT);
    let html = report_file::render(dir).map_err(|e| OutputError {
        path: path.clone(),
        source: io::Error::other(e.to_string()),
    })?;
    write_file(&path, &html)
}

/// Writes `text` to `path` through a temporary file beside it (see [`replace`]); an error names
/// `path`, the file asked for, not the temporary one.
pub fn write_file(path: &Path, text: &str) -> Result<(), OutputError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let named = |source| OutputError {
        path: path.to_path_buf(),
        source,
    };
    replace(path, Path::new(&tmp), |mut f| {
        f.write_all(text.as_bytes())
            .and_then(|()| f.sync_data())
            .map_err(named)
    })
    .map_err(|e| named(e.source))
}

/// Writes `dir/hlog/step-NNN.hgrm`, the step's merged latency as HdrHistogram's percentile
/// distribution (what its plotFiles and gnuplot scripts read), through a temporary file like the hlog.
pub fn write_hgrm(dir: &Path, d: &Distribution) -> Result<(), OutputError> {
    let path = dir.join("hlog").join(format!("step-{:03}.hgrm", d.step));
    write_file(&path, &d.to_hgrm())
}

/// Writes `path` through `tmp` beside it, then renames it into place: a reader sees the old file or
/// the whole new one, and a failed write (a full disk) leaves the old file and no half one beside it.
fn replace(
    path: &Path,
    tmp: &Path,
    write: impl FnOnce(File) -> Result<(), OutputError>,
) -> Result<(), OutputError> {
    if let Err(e) = File::create(tmp).map_err(at(tmp)).and_then(write) {
        let _ = fs::remove_file(tmp);
        return Err(e);
    }
    fs::rename(tmp, path).map_err(at(path))
}

/// The .hlog's text for [`write_hlog`], into `out`; errors name `path`, the file it becomes.
fn hlog_lines<E>(
    out: &mut impl Write,
    path: &Path,
    step: u32,
    started: SystemTime,
    intervals: impl IntoIterator<Item = Result<HlogInterval, E>>,
    agents: &[String],
) -> Result<(), OutputError>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let mut serializer = Deflater::default();
    let mut w = IntervalLogWriterBuilder::new()
        .add_comment(&format!(
            "stampede {} step {step}: latency in microseconds",
            shared::VERSION
        ))
        .add_comment("untagged lines: all agents merged; Tag= lines: one agent each")
        .with_start_time(started)
        .with_base_time(started)
        .with_max_value_divisor(1000.0)
        .begin_log_with(out, &mut serializer)
        .map_err(at(path))?;
    let to_io = |e| io::Error::other(format!("{e:?}"));
    let mut merger = Merger::default();
    // Tags cannot hold the log's separators; cleaned once per agent, not once per line.
    let tags: Vec<String> = agents
        .iter()
        .map(|a| a.replace([',', ' ', '\t'], "_"))
        .collect();
    for i in intervals {
        let i = i.map_err(io::Error::other).map_err(at(path))?;
        let all = merger.merge(i.per_agent.iter().map(|(_, h)| h));
        w.write_histogram(all, i.offset, i.length, None)
            .map_err(to_io)
            .map_err(at(path))?;
        for (agent, h) in &i.per_agent {
            w.write_histogram(merger.one(h), i.offset, i.length, Tag::new(&tags[*agent]))
                .map_err(to_io)
                .map_err(at(path))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use shared::histogram;

    #[test]
    fn hlog_is_readable_by_the_standard_reader() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("hlog")).unwrap();
        let mut a = histogram::new();
        a.record(20_000).unwrap();
        let mut b = histogram::new();
        b.record_n(5_000, 3).unwrap();
        let enc = |h| Encoded::parse(histogram::encode(h)).unwrap();
        let intervals = vec![HlogInterval {
            offset: Duration::from_secs(0),
            length: Duration::from_secs(1),
            per_agent: vec![(1, enc(&a)), (0, enc(&b))],
        }];
        let agents = ["b".to_string(), "agent a, 1".to_string()];
        write_hlog(
            dir.path(),
            1,
            SystemTime::now(),
            intervals.into_iter().map(Ok::<_, io::Error>),
            &agents,
        )
        .unwrap();
        let text = fs::read(dir.path().join("hlog/step-001.hlog")).unwrap();
        let mut lines = Vec::new();
        for entry in IntervalLogIterator::new(&text) {
            if let LogEntry::Interval(i) = entry.unwrap() {
                let max_ms = (i.max() * 10.0).round() / 10.0;
                lines.push((i.tag().map(|t| t.as_str().to_string()), max_ms));
            }
        }
        // Merged first, then each agent under its name, in arrival order.
        assert_eq!(
            lines,
            vec![
                (None, 20.0),
                (Some("agent_a__1".to_string()), 20.0),
                (Some("b".to_string()), 5.0),
            ]
        );
    }

    #[test]
    fn an_interval_that_cannot_be_read_fails_the_hlog_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("hlog")).unwrap();
        let mut a = histogram::new();
        a.record(20_000).unwrap();
        let good = HlogInterval {
            offset: Duration::from_secs(0),
            length: Duration::from_secs(1),
            per_agent: vec![(0, Encoded::parse(histogram::encode(&a)).unwrap())],
        };
        let intervals = vec![Ok(good), Err(io::Error::other("the spill is gone"))];
        let e = write_hlog(dir.path(), 2, SystemTime::now(), intervals, &["a".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("step-002.hlog: the spill is gone") && !e.contains("hlog.tmp"),
            "{e}"
        );
        let left: Vec<_> = fs::read_dir(dir.path().join("hlog")).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn unwritable_directory_is_refused_up_front() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        fs::write(&file, b"x").unwrap();
        let e = claim(&file.join("sub"), false, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not writable"), "{e}");
    }

    #[test]
    fn runs_started_in_the_same_second_shared_the_default_directory() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("stampede-results").join("20261130T201500Z");
        let taken: Vec<PathBuf> = (0..3).map(|_| claim(&base, true, false).unwrap()).collect();
        let names: Vec<String> = taken
            .iter()
            .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "20261130T201500Z",
                "20261130T201500Z-2",
                "20261130T201500Z-3"
            ]
        );
    }

    #[test]
    fn hgrm_is_the_steps_distribution_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("hlog")).unwrap();
        let mut h = histogram::new();
        h.record_n(20_000, 9).unwrap();
        h.record(80_000).unwrap();
        let d = Distribution::of(7, &h);
        write_hgrm(dir.path(), &d).unwrap();
        let text = fs::read_to_string(dir.path().join("hlog/step-007.hgrm")).unwrap();
        assert_eq!(text, d.to_hgrm());
        let back = Distribution::parse_hgrm(7, &text).unwrap();
        let top_ms = h.highest_equivalent(80_000) as f64 / 1000.0;
        assert_eq!((back.step, back.total, back.max_ms), (7, 10, top_ms));
        let names: Vec<_> = fs::read_dir(dir.path().join("hlog"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["step-007.hgrm"]);
    }

    #[test]
    fn a_reused_out_directory_holding_only_hgrm_files_was_taken_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("hlog")).unwrap();
        fs::write(dir.path().join("hlog/step-001.hgrm"), b"old").unwrap();
        fs::write(dir.path().join("hlog/step-002.hgrm.tmp"), b"old").unwrap();
        let e = claim(dir.path(), false, false).unwrap_err().to_string();
        assert!(
            e.contains("hlog/step-001.hgrm, hlog/step-002.hgrm.tmp"),
            "{e}"
        );
        claim(dir.path(), false, true).unwrap();
        assert_eq!(fs::read_dir(dir.path().join("hlog")).unwrap().count(), 0);
    }

    #[test]
    fn a_reused_out_directory_kept_the_earlier_runs_files() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("today");
        fs::create_dir_all(out.join("hlog")).unwrap();
        for f in [
            "run.json",
            "steps.tsv",
            "hlog/step-001.hlog",
            "hlog/step-002.hlog",
        ] {
            fs::write(out.join(f), b"old").unwrap();
        }
        fs::write(out.join("notes.txt"), b"the user's").unwrap();
        let e = claim(&out, false, false).unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "output directory {} holds another run's files",
                out.display()
            )) && e.contains("run.json, steps.tsv, hlog/step-001.hlog, hlog/step-002.hlog")
                && e.contains("--force"),
            "{e}"
        );
        assert_eq!(fs::read(out.join("hlog/step-002.hlog")).unwrap(), b"old");
        claim(&out, false, true).unwrap();
        assert!(!out.join("steps.tsv").exists());
        assert_eq!(fs::read_dir(out.join("hlog")).unwrap().count(), 0);
        assert_eq!(fs::read(out.join("notes.txt")).unwrap(), b"the user's");
        // The new run holds it now: another refuses it, a run that wrote nothing lets it go.
        assert!(claim(&out, false, false).is_err());
        release(&out);
        claim(&out, false, false).unwrap();
    }

    #[test]
    fn a_file_that_cannot_be_written_is_named_not_its_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().join("no-such-dir").join("r.html");
        let e = write_file(&to, "page").unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("cannot write {}: ", to.display())),
            "{e}"
        );
        let to = dir.path().join("r.html");
        write_file(&to, "page").unwrap();
        assert_eq!(fs::read_to_string(&to).unwrap(), "page");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary left"
        );
    }

    #[test]
    fn an_earlier_runs_report_alone_kept_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(REPORT), b"old").unwrap();
        let e = claim(dir.path(), false, false).unwrap_err().to_string();
        assert!(e.contains("another run's files (report.html)"), "{e}");
        claim(dir.path(), false, true).unwrap();
        assert!(!dir.path().join(REPORT).exists());
    }

    fn config(out: &Path) -> RunConfig {
        crate::config::resolve(crate::cli::RunArgs {
            plan_or_url: vec!["http://127.0.0.1:1/".into()],
            steps: Some(crate::cli::Steps(vec![10.0])),
            out: Some(out.to_path_buf()),
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn a_labelled_run_says_its_label_in_run_json() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(dir.path());
        claim(&cfg.out, false, false).unwrap();
        Output::create(&cfg, &[], &[], &[]).unwrap();
        let read = |d: &Path| RunFile::read(&d.join("run.json")).unwrap().label;
        assert_eq!(read(dir.path()), None);
        cfg.label = Some("nginx".into());
        Output::create(&cfg, &[], &[], &[]).unwrap();
        assert_eq!(read(dir.path()).as_deref(), Some("nginx"));
    }

    #[test]
    fn a_side_by_side_directory_kept_another_comparison() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("x");
        assert_eq!(claim_beside(&out, false, false).unwrap(), out);
        fs::write(out.join("compare.tsv"), b"old").unwrap();
        fs::write(out.join("notes.txt"), b"the user's").unwrap();
        let e = claim_beside(&out, false, false).unwrap_err().to_string();
        assert!(
            e.contains("holds another run's files (compare.tsv)") && e.contains("--force"),
            "{e}"
        );
        claim_beside(&out, false, true).unwrap();
        assert!(!out.join("compare.tsv").exists());
        assert!(out.join("notes.txt").exists());
        // A default name is never shared: the next one is suffixed.
        let fresh = claim_beside(&out, true, false).unwrap();
        assert_eq!(fresh, dir.path().join("x-2"));
    }

    #[test]
    fn after_a_full_disk_steps_tsv_held_one_step_more_than_run_json() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(&dir.path().join("r"));
        claim(&cfg.out, false, false).unwrap();
        let mut out = Output::create(&cfg, &[], &[], &[]).unwrap();
        let mut snap = shared::metrics::Snapshot::default();
        snap.counters.requests = 10;
        snap.counters.replies = 10;
        snap.counters.ok = 10;
        snap.hist.latency.record_n(1000, 10).unwrap();
        let step = |number: u32| {
            results::step::summarize(&results::step::StepInput {
                number,
                model: shared::plan::LoadModel::Requests,
                value: 10.0,
                demanded_rate: Some(10.0),
                duration: Duration::from_secs(1),
                total: &snap,
                series: &[],
                agents: vec![],
                aborted: false,
                mark_lost: true,
                start_skew: None,
                ok_status: &shared::status::StatusSet::default(),
                baseline_p50_ms: None,
            })
        };
        let merged = histogram::new();
        let write = |out: &mut Output, n: u32| {
            let none: Vec<Result<HlogInterval, std::io::Error>> = Vec::new();
            let d = Distribution::of(n, &merged);
            out.write_step(&step(n), SystemTime::now(), none, &[], &d)
                .unwrap();
        };
        write(&mut out, 1);
        out.write_summary(&results::step::summarize_run(&[step(1)]))
            .unwrap();
        write(&mut out, 2);
        // run.json cannot be replaced (its temporary's name is taken by a directory), as on a
        // full disk.
        fs::create_dir(out.dir().join("run.json.tmp")).unwrap();
        assert!(
            out.write_summary(&results::step::summarize_run(&[step(1), step(2)]))
                .is_err()
        );
        let run: serde_json::Value =
            serde_json::from_slice(&fs::read(out.dir().join("run.json")).unwrap()).unwrap();
        let tsv = fs::read_to_string(out.dir().join("steps.tsv")).unwrap();
        assert_eq!(run["steps"].as_array().unwrap().len(), 1);
        assert_eq!(tsv.lines().count(), 2, "the header and step 1 only: {tsv}");
        // The run goes on to its finish with what run.json holds.
        fs::remove_dir(out.dir().join("run.json.tmp")).unwrap();
        out.finish(RunStatus::Failed).unwrap();
        let run: serde_json::Value =
            serde_json::from_slice(&fs::read(out.dir().join("run.json")).unwrap()).unwrap();
        assert_eq!(run["steps"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn a_run_that_never_started_left_its_directory_with_an_empty_hlog() {
        let dir = tempfile::tempdir().unwrap();
        // Made by the run (a stamped name, or a given one that did not exist): gone with its claim.
        for (given, fresh) in [("stamped", true), ("new", false)] {
            let claimed = claim(&dir.path().join(given), fresh, false).unwrap();
            release(&claimed);
            assert!(!claimed.exists(), "{given}: {claimed:?} is left");
        }
        // The user's own directory stays, as it was, whatever else it holds.
        let own = dir.path().join("own");
        fs::create_dir(&own).unwrap();
        release(&claim(&own, false, false).unwrap());
        assert!(own.is_dir() && fs::read_dir(&own).unwrap().count() == 0);
        fs::write(own.join("notes.txt"), b"the user's").unwrap();
        let gone = dir.path().join("gone");
        let claimed = claim(&gone, false, false).unwrap();
        fs::write(claimed.join("notes.txt"), b"the user's").unwrap();
        release(&claimed);
        assert!(claimed.join("notes.txt").is_file() && !claimed.join("hlog").exists());
    }

    #[test]
    fn run_json_stayed_starting_or_running_after_the_process_ended() {
        let dir = tempfile::tempdir().unwrap();
        let claimed = claim(&dir.path().join("a"), false, false).unwrap();
        fail_unfinished(&claimed, "boom");
        assert!(
            !claimed.join("run.json").exists(),
            "a claim alone is removed"
        );
        let cfg = config(&dir.path().join("b"));
        claim(&cfg.out, false, false).unwrap();
        let out = Output::create(&cfg, &[], &[], &[]).unwrap();
        fail_unfinished(out.dir(), "agent a:1 refused: no");
        let read = |d: &Path| -> serde_json::Value {
            serde_json::from_slice(&fs::read(d.join("run.json")).unwrap()).unwrap()
        };
        let run = read(out.dir());
        assert_eq!(run["status"], "failed");
        assert!(run["finished_at"].is_string());
        assert_eq!(run["warnings"][0], "the run failed: agent a:1 refused: no");
        // A finished run is left as it ended.
        let mut out = Output::create(&cfg, &[], &[], &[]).unwrap();
        out.finish(RunStatus::Completed).unwrap();
        fail_unfinished(out.dir(), "late");
        assert_eq!(read(out.dir())["status"], "completed");
    }

    #[test]
    fn run_json_stayed_running_when_it_could_not_be_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path());
        claim(&cfg.out, false, false).unwrap();
        let mut out = Output::create(&cfg, &[], &[], &[]).unwrap();
        // No room for the copy beside it (as on a full disk): the rewrite fails.
        fs::create_dir(dir.path().join("run.json.tmp")).unwrap();
        let done = out.finish(RunStatus::Aborted).unwrap();
        assert!(matches!(done, Finished::StatusOnly(_)), "{done:?}");
        let run: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.path().join("run.json")).unwrap()).unwrap();
        assert_eq!(run["status"], "aborted");
        // A status longer than the room left for it still does not say running.
        out.finish(RunStatus::Completed).unwrap();
        let run: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.path().join("run.json")).unwrap()).unwrap();
        assert_eq!(run["status"], "failed");
    }
}
