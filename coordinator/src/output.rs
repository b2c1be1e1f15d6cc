//! The run's files: the step table (TSV/CSV), run.json and one HdrHistogram interval log per step. Each
//! is written as its step finishes, so a killed run keeps every finished step.
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use shared::histogram::{Deflater, Encoded, Merger};
use shared::report::{RUN_SCHEMA, StepResult, table_header, table_row};

use crate::config::{ConfigError, RunConfig};

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

/// What run.json says about an agent.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AgentInfo {
    pub name: String,
    pub version: String,
    pub hostname: String,
    pub cores: u32,
    pub threads: u32,
    pub fd_limit: u64,
    pub port_range: [u32; 2],
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
    separator: char,
    json_path: PathBuf,
    doc: serde_json::Value,
}

/// Checks up front that results can be written, so a long run never ends in a lost result.
pub fn prepare_dir(dir: &Path) -> Result<(), ConfigError> {
    let err = |source| ConfigError::Output {
        path: dir.to_path_buf(),
        source,
    };
    fs::create_dir_all(dir.join("hlog")).map_err(err)?;
    let probe = dir.join(".stampede-write-test");
    fs::write(&probe, b"ok").map_err(err)?;
    let _ = fs::remove_file(probe);
    Ok(())
}

impl Output {
    /// `warnings` are the agents' warnings about the whole run (e.g. a source address they lack), each
    /// prefixed with its agent.
    pub fn create(
        cfg: &RunConfig,
        agents: &[AgentInfo],
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
        let header = table_header(&cfg.host, cfg.plan.model).join(&sep.to_string());
        writeln!(table, "{header}").map_err(at(&table_path))?;
        let doc = serde_json::json!({
            "schema": RUN_SCHEMA,
            "tool": { "name": "stampede", "version": shared::VERSION },
            "status": "running",
            "started_at": humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            "finished_at": null,
            "target": cfg.plan.workload.origin().origin(),
            "plan": cfg.echo,
            "agents": agents,
            "warnings": warnings,
            "steps": [],
        });
        let out = Output {
            dir,
            table,
            table_path,
            separator: sep,
            json_path: cfg.out.join("run.json"),
            doc,
        };
        out.write_json()?;
        Ok(out)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends the step to every output and makes it durable before the next step starts. `agents`
    /// names the agents that `hlog` refers to by index; `hlog` is read as in [`write_hlog`].
    pub fn write_step<E>(
        &mut self,
        r: &StepResult,
        started: SystemTime,
        hlog: impl IntoIterator<Item = Result<HlogInterval, E>>,
        agents: &[String],
    ) -> Result<(), OutputError>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let row = table_row(r).join(&self.separator.to_string());
        writeln!(self.table, "{row}").map_err(at(&self.table_path))?;
        self.table.sync_data().map_err(at(&self.table_path))?;
        write_hlog(&self.dir, r.step, started, hlog, agents)?;
        let value = serde_json::to_value(r).expect("a StepResult always serializes");
        if let Some(steps) = self.doc["steps"].as_array_mut() {
            steps.push(value);
        }
        self.write_json()
    }

    /// Sets a top-level field of run.json (written with the next step or the finish).
    pub fn record(&mut self, key: &str, value: &impl serde::Serialize) {
        self.doc[key] = serde_json::to_value(value).expect("run.json fields always serialize");
    }

    pub fn finish(&mut self, status: &str) -> Result<(), OutputError> {
        self.doc["status"] = status.into();
        self.doc["finished_at"] = humantime::format_rfc3339_millis(SystemTime::now())
            .to_string()
            .into();
        self.write_json()
    }

    /// Replaces run.json atomically: readers see the old or the new file, never half of one.
    fn write_json(&self) -> Result<(), OutputError> {
        let tmp = self.json_path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(&self.doc).expect("run.json always serializes");
        replace(&self.json_path, &tmp, |mut f| {
            f.write_all(text.as_bytes())
                .and_then(|()| f.write_all(b"\n"))
                .and_then(|()| f.sync_data())
                .map_err(at(&tmp))
        })
    }
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
            0,
            SystemTime::now(),
            intervals.into_iter().map(Ok::<_, io::Error>),
            &agents,
        )
        .unwrap();
        let text = fs::read(dir.path().join("hlog/step-000.hlog")).unwrap();
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
        let e = prepare_dir(&file.join("sub")).unwrap_err().to_string();
        assert!(e.contains("is not writable"), "{e}");
    }
}
