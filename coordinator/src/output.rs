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

/// One interval's latency of a batch of named requests, for their .hlog files: per name of the batch
/// (in order), each report's histogram of it as it arrived.
#[derive(Debug)]
pub struct NamesInterval {
    pub offset: Duration,
    pub length: Duration,
    pub per_name: Vec<Vec<Encoded>>,
}

/// How many named requests' .hlog files are written at once: each open file holds a compressor (a
/// few hundred KB) and the batch's share of an interval's histograms, so a mix of thousands of names
/// costs passes over the spill, not memory.
pub const NAMES_PER_PASS: usize = 16;

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

/// A row per step and named request, rewritten whole after each step (a mix's requests only).
pub const REQUESTS_TSV: &str = "requests.tsv";

/// The files in `dir` that a run writes (its own, or one left half-written by a killed run).
fn run_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut found: Vec<PathBuf> = [
        "run.json",
        "run.json.tmp",
        "steps.tsv",
        "steps.csv",
        REQUESTS_TSV,
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
        let extra = results::table::Extra {
            tls: cfg.echo.tls_sessions.is_some(),
            sessions: cfg.echo.wsesslog.is_some(),
            setup: cfg.echo.setup.is_some(),
            search,
        };
        // Each Prometheus source's own queries, those that watch this target's server or all.
        let server_extras: Vec<_> = cfg
            .server_prometheus
            .iter()
            .filter(|p| names.contains(&p.name))
            .filter_map(crate::server_prom::ServerProm::extras)
            .collect();
        let columns = StepTable::of_run(
            &cfg.host,
            cfg.plan.model(),
            extra,
            &names,
            paired,
            &server_extras,
        );
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
        doc.commit = cfg.commit.clone();
        doc.monitors = monitors.to_vec();
        doc.paired_monitor = paired.map(str::to_string);
        doc.server_extras = server_extras;
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
        if !r.per_request.is_empty() {
            let text = results::requests_table::tsv(&self.doc.steps);
            write_file(&self.dir.join(REQUESTS_TSV), &text)?;
        }
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

/// `dir/hlog/step-NNN.NAME.hlog`, the .hlog of named request `name` in step `step`.
pub fn name_hlog_path(dir: &Path, step: u32, name: &str) -> PathBuf {
    dir.join("hlog").join(format!("step-{step:03}.{name}.hlog"))
}

/// Writes `dir/hlog/step-NNN.NAME.hlog` for each of `names` (a mix's requests, by index): per
/// interval, the fleet's merged latency of that name (served replies, and given-up requests at their
/// age, as the step's .hlog), one untagged line an interval, an empty one where the name saw nothing.
/// `intervals(range)` gives the step's intervals in order for the names in `range`; it is called once
/// per [`NAMES_PER_PASS`] names, whose files are written side by side, each through a temporary file
/// renamed over it as [`write_hlog`]'s is. A request's name is letters, digits, `_`, `.` and `-`,
/// which a file name holds as it is.
pub fn write_name_hlogs<E, I>(
    dir: &Path,
    step: u32,
    started: SystemTime,
    names: &[String],
    mut intervals: impl FnMut(std::ops::Range<usize>) -> I,
) -> Result<(), OutputError>
where
    E: std::error::Error + Send + Sync + 'static,
    I: IntoIterator<Item = Result<NamesInterval, E>>,
{
    let mut first = 0;
    while first < names.len() {
        let batch = first..(first + NAMES_PER_PASS).min(names.len());
        name_hlog_batch(
            dir,
            step,
            started,
            &names[batch.clone()],
            intervals(batch.clone()),
        )?;
        first = batch.end;
    }
    Ok(())
}

/// One batch of [`write_name_hlogs`]: its files written side by side, then renamed into place; on an
/// error every temporary file of the batch is removed.
fn name_hlog_batch<E>(
    dir: &Path,
    step: u32,
    started: SystemTime,
    names: &[String],
    intervals: impl IntoIterator<Item = Result<NamesInterval, E>>,
) -> Result<(), OutputError>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let paths: Vec<PathBuf> = names.iter().map(|n| name_hlog_path(dir, step, n)).collect();
    let tmps: Vec<PathBuf> = paths.iter().map(|p| p.with_extension("hlog.tmp")).collect();
    let written = name_hlog_lines(step, started, names, &paths, &tmps, intervals);
    if let Err(e) = written {
        for t in &tmps {
            let _ = fs::remove_file(t);
        }
        return Err(e);
    }
    for (tmp, path) in tmps.iter().zip(&paths) {
        fs::rename(tmp, path).map_err(at(path))?;
    }
    Ok(())
}

/// The lines of a batch's files, into `tmps`; errors name `paths`, the files they become.
fn name_hlog_lines<E>(
    step: u32,
    started: SystemTime,
    names: &[String],
    paths: &[PathBuf],
    tmps: &[PathBuf],
    intervals: impl IntoIterator<Item = Result<NamesInterval, E>>,
) -> Result<(), OutputError>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let mut outs = Vec::with_capacity(tmps.len());
    for t in tmps {
        outs.push(io::BufWriter::new(File::create(t).map_err(at(t))?));
    }
    let mut serializers: Vec<Deflater> = names.iter().map(|_| Deflater::default()).collect();
    let to_io = |e| io::Error::other(format!("{e:?}"));
    let mut writers = Vec::with_capacity(names.len());
    for (((name, out), serializer), path) in
        names.iter().zip(&mut outs).zip(&mut serializers).zip(paths)
    {
        let w = IntervalLogWriterBuilder::new()
            .add_comment(&format!(
                "stampede {} step {step} request {name}: latency in microseconds",
                shared::VERSION
            ))
            .add_comment("untagged lines: all agents merged (served replies and given-up requests)")
            .with_start_time(started)
            .with_base_time(started)
            .with_max_value_divisor(1000.0)
            .begin_log_with(out, serializer)
            .map_err(at(path))?;
        writers.push(w);
    }
    let mut merger = Merger::default();
    for i in intervals {
        let i = i.map_err(io::Error::other).map_err(at(&paths[0]))?;
        for ((w, reports), path) in writers.iter_mut().zip(&i.per_name).zip(paths) {
            w.write_histogram(merger.merge(reports), i.offset, i.length, None)
                .map_err(to_io)
                .map_err(at(path))?;
        }
    }
    drop(writers);
    for (out, path) in outs.iter_mut().zip(paths) {
        out.flush().map_err(at(path))?;
    }
    Ok(())
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
mod tests;
