//! A configure's feeder rows as this agent holds them: spooled to temporary files as they arrive over
//! the control link (never whole in memory), dealt to the worker threads as they come (shard, circular,
//! copy: a file per worker) or kept in one file with an offset per row (random), and read back by each
//! worker as a stream, where it left off at the last step. Each file is unlinked as soon as it is
//! made: it lives as long as its descriptors (a new configure, the session's end), and nothing is
//! left in the temporary directory however the process ends.
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use shared::plan::{Data, Dealer, Feeder, FeederMode, MAX_FIELD, decode_rows};
use shared::rng::Rng;

/// What went wrong with a feeder's rows on this agent.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    #[error("feeder rows for feeder {0}, which the configure does not have")]
    NoSuchFeeder(u32),
    #[error("feeder {feeder}: {why}")]
    Bad { feeder: String, why: String },
    #[error("feeder {feeder}: spooling its rows to {path}: {source}")]
    Spool {
        feeder: String,
        path: String,
        source: std::io::Error,
    },
    #[error("feeder {0}: its rows are not all here yet (no end of rows received)")]
    Unfinished(String),
}

/// The rows of every feeder of a configure, spooled.
pub struct Feeds {
    /// The feeders they are the rows of.
    feeders: Vec<Feeder>,
    /// Kept from an earlier configure of the same feeders: rows arriving now replace them.
    kept: bool,
    spools: Vec<Arc<Spool>>,
    /// Spool files are built until `finish`; then only read.
    writers: Vec<Option<Writer>>,
}

/// One feeder's spooled rows.
pub struct Spool {
    name: String,
    mode: FeederMode,
    columns: usize,
    /// One per worker (dealt), or one (random); unlinked, read by position.
    files: Vec<File>,
    /// The names they had, for the words of an error.
    paths: Vec<PathBuf>,
    /// Rows in each file.
    rows: Vec<u64>,
    /// Random mode: where each row starts in the one file.
    offsets: Vec<u64>,
    /// Where each worker's reading is (a byte offset in its file), kept from one step to the next.
    positions: Vec<AtomicU64>,
}

struct Writer {
    files: Vec<BufWriter<File>>,
    dealer: Option<Dealer>,
    rows: Vec<u64>,
    at: u64,
    offsets: Vec<u64>,
}

static SPOOLS: AtomicU64 = AtomicU64::new(0);

impl Feeds {
    /// Empty spools for `data`'s feeders, dealt among `workers` worker threads.
    pub fn new(data: &Data, workers: usize) -> Result<Feeds, FeedError> {
        let workers = workers.max(1);
        let mut spools = Vec::new();
        let mut writers = Vec::new();
        for f in data.feeders() {
            let count = if f.mode() == FeederMode::Random {
                1
            } else {
                workers
            };
            let n = SPOOLS.fetch_add(1, Ordering::Relaxed);
            let paths: Vec<PathBuf> = (0..count)
                .map(|w| {
                    std::env::temp_dir().join(format!(
                        "stampede-feed-{}-{n}-{}-{w}",
                        std::process::id(),
                        f.name()
                    ))
                })
                .collect();
            let (mut out, mut files) = (Vec::new(), Vec::new());
            for p in &paths {
                let spool_error = |source| FeedError::Spool {
                    feeder: f.name().into(),
                    path: p.display().to_string(),
                    source,
                };
                let file = File::options()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(p)
                    .map_err(spool_error)?;
                std::fs::remove_file(p).map_err(spool_error)?;
                out.push(BufWriter::with_capacity(
                    64 * 1024,
                    file.try_clone().map_err(spool_error)?,
                ));
                files.push(file);
            }
            spools.push(Spool {
                name: f.name().into(),
                mode: f.mode(),
                columns: f.columns().len(),
                files,
                paths,
                rows: Vec::new(),
                offsets: Vec::new(),
                positions: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            });
            writers.push(Some(Writer {
                dealer: Dealer::new(&vec![1; count]),
                rows: vec![0; count],
                files: out,
                at: 0,
                offsets: Vec::new(),
            }));
        }
        Ok(Feeds {
            feeders: data.feeders().to_vec(),
            kept: false,
            spools: spools.into_iter().map(Arc::new).collect(),
            writers,
        })
    }

    /// The spools for a configure of `data`: these, where they hold the same feeders' rows whole
    /// (the coordinator then sends none: a shard goes on where it was), else new empty ones.
    pub fn reconfigured(self, data: &Data, workers: usize) -> Result<Feeds, FeedError> {
        if !data.feeders().is_empty() && self.feeders == data.feeders() && self.ready().is_ok() {
            return Ok(Feeds { kept: true, ..self });
        }
        drop(self);
        Feeds::new(data, workers)
    }

    /// Whether they were kept from an earlier configure (see [`Feeds::reconfigured`]).
    pub fn kept(&self) -> bool {
        self.kept
    }

    /// Empty spools for the same feeders: rows sent after a configure that kept them replace them.
    pub fn renewed(&self, workers: usize) -> Result<Feeds, FeedError> {
        let data = Data::try_new(self.feeders.clone(), None).map_err(|e| FeedError::Bad {
            feeder: String::new(),
            why: e.to_string(),
        })?;
        Feeds::new(&data, workers)
    }

    /// Spools a chunk of rows of feeder `feeder`.
    pub fn rows(&mut self, feeder: u32, bytes: &[u8]) -> Result<(), FeedError> {
        let i = feeder as usize;
        let spool = self.spools.get(i).ok_or(FeedError::NoSuchFeeder(feeder))?;
        let (name, columns, random) = (
            spool.name.clone(),
            spool.columns,
            spool.mode == FeederMode::Random,
        );
        let paths = spool.paths.clone();
        let Some(w) = self.writers[i].as_mut() else {
            return Err(FeedError::Bad {
                feeder: name,
                why: "rows after its end".into(),
            });
        };
        let mut failed = None;
        let mut one = Vec::new();
        let decoded = decode_rows(bytes, columns, |fields| {
            if failed.is_some() {
                return;
            }
            let to = match &mut w.dealer {
                Some(d) => d.next_party(),
                None => 0,
            };
            one.clear();
            for f in fields {
                one.extend_from_slice(&(f.len() as u32).to_le_bytes());
                one.extend_from_slice(f);
            }
            if random {
                w.offsets.push(w.at);
                w.at += one.len() as u64;
            }
            w.rows[to] += 1;
            if let Err(e) = w.files[to].write_all(&one) {
                failed = Some((to, e));
            }
        });
        if let Some((to, source)) = failed {
            return Err(FeedError::Spool {
                feeder: name,
                path: paths[to].display().to_string(),
                source,
            });
        }
        decoded
            .map(drop)
            .map_err(|why| FeedError::Bad { feeder: name, why })
    }

    /// The end of feeder `feeder`'s rows: `sent` is how many the coordinator sent this agent.
    pub fn end(&mut self, feeder: u32, sent: u64) -> Result<(), FeedError> {
        let i = feeder as usize;
        let spool = self
            .spools
            .get_mut(i)
            .ok_or(FeedError::NoSuchFeeder(feeder))?;
        let Some(mut w) = self.writers[i].take() else {
            return Ok(());
        };
        for (k, f) in w.files.iter_mut().enumerate() {
            f.flush().map_err(|source| FeedError::Spool {
                feeder: spool.name.clone(),
                path: spool.paths[k].display().to_string(),
                source,
            })?;
        }
        let got: u64 = w.rows.iter().sum();
        if got != sent {
            return Err(FeedError::Bad {
                feeder: spool.name.clone(),
                why: format!("{got} rows arrived where {sent} were sent"),
            });
        }
        // Still only this session holds it: the workers get it at a step's start.
        let s = Arc::get_mut(spool).ok_or(FeedError::Bad {
            feeder: feeder.to_string(),
            why: "ended while in use".into(),
        })?;
        s.rows = w.rows;
        s.offsets = w.offsets;
        Ok(())
    }

    /// The spools for a step, once every feeder's rows have all arrived.
    pub fn ready(&self) -> Result<Arc<[Arc<Spool>]>, FeedError> {
        if let Some(i) = self.writers.iter().position(Option::is_some) {
            return Err(FeedError::Unfinished(self.spools[i].name.clone()));
        }
        Ok(self.spools.clone().into())
    }
}

/// One row of a feeder: its fields, in its columns' order.
#[derive(Debug, Default)]
pub struct Row {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Row {
    /// A row of these fields (as a spool would give it).
    pub fn of(fields: &[&[u8]]) -> Row {
        let mut row = Row::default();
        for f in fields {
            row.bytes.extend_from_slice(f);
            row.ends.push(row.bytes.len());
        }
        row
    }

    pub fn field(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }
}

/// Why a worker has no row for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoRow {
    /// Shard: this worker's rows are all used.
    RanOut,
    /// The spool could not be read.
    Unreadable,
}

/// A worker's reading of one feeder, for one step.
pub struct Cursor {
    spool: Arc<Spool>,
    worker: usize,
    /// The file this worker reads (its own, or another's where its own is empty and the mode wraps).
    file: Option<BufReader<At>>,
    pos: u64,
    size: u64,
}

impl Cursor {
    pub fn new(spool: &Arc<Spool>, worker: usize) -> Cursor {
        let worker = worker % spool.positions.len();
        let mut c = Cursor {
            spool: spool.clone(),
            worker,
            file: None,
            pos: spool.positions[worker].load(Ordering::Relaxed),
            size: 0,
        };
        let which = if spool.mode == FeederMode::Random {
            Some(0)
        } else if spool.rows.get(worker).is_some_and(|&n| n > 0) {
            Some(worker)
        } else if spool.mode.wraps() {
            // Fewer rows than workers: the dealt files with rows are the first ones.
            let full = spool.rows.iter().filter(|&&n| n > 0).count();
            (full > 0).then(|| worker % full)
        } else {
            None
        };
        if let Some(k) = which
            && let Ok(f) = spool.files[k].try_clone()
        {
            c.size = f.metadata().map(|m| m.len()).unwrap_or(0);
            if c.pos >= c.size {
                c.pos = if spool.mode.wraps() { 0 } else { c.size };
            }
            c.file = Some(At::reader(f, c.pos));
        }
        c
    }

    pub fn name(&self) -> &str {
        &self.spool.name
    }

    pub fn mode(&self) -> FeederMode {
        self.spool.mode
    }

    /// The next row for a request.
    pub fn next(&mut self, rng: &mut Rng) -> Result<Row, NoRow> {
        let columns = self.spool.columns;
        let Some(file) = self.file.as_mut() else {
            return Err(if self.spool.mode.wraps() {
                NoRow::Unreadable
            } else {
                NoRow::RanOut
            });
        };
        if self.spool.mode == FeederMode::Random {
            let n = self.spool.offsets.len();
            if n == 0 {
                return Err(NoRow::Unreadable);
            }
            let at = self.spool.offsets[rng.below(n)];
            return read_row_at(&file.get_ref().file, at, columns).ok_or(NoRow::Unreadable);
        }
        if self.pos >= self.size {
            if !self.spool.mode.wraps() {
                return Err(NoRow::RanOut);
            }
            let f = file
                .get_ref()
                .file
                .try_clone()
                .map_err(|_| NoRow::Unreadable)?;
            *file = At::reader(f, 0);
            self.pos = 0;
        }
        let mut row = Row::default();
        for _ in 0..columns {
            let mut len = [0u8; 4];
            file.read_exact(&mut len).map_err(|_| NoRow::Unreadable)?;
            let len = u32::from_le_bytes(len) as usize;
            if len > MAX_FIELD {
                return Err(NoRow::Unreadable);
            }
            let start = row.bytes.len();
            row.bytes.resize(start + len, 0);
            file.read_exact(&mut row.bytes[start..])
                .map_err(|_| NoRow::Unreadable)?;
            row.ends.push(row.bytes.len());
            self.pos += 4 + len as u64;
        }
        Ok(row)
    }
}

impl Drop for Cursor {
    /// The next step goes on where this one stopped.
    fn drop(&mut self) {
        self.spool.positions[self.worker].store(self.pos, Ordering::Relaxed);
    }
}

/// A spool file read from a position of its own (by `pread`): the descriptors of one file share
/// their offset, the positions of its readers do not.
pub struct At {
    file: File,
    pos: u64,
}

impl At {
    fn reader(file: File, pos: u64) -> BufReader<At> {
        BufReader::with_capacity(16 * 1024, At { file, pos })
    }
}

impl Read for At {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

fn read_row_at(file: &File, mut at: u64, columns: usize) -> Option<Row> {
    let mut row = Row::default();
    for _ in 0..columns {
        let mut len = [0u8; 4];
        file.read_exact_at(&mut len, at).ok()?;
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_FIELD {
            return None;
        }
        let start = row.bytes.len();
        row.bytes.resize(start + len, 0);
        file.read_exact_at(&mut row.bytes[start..], at + 4).ok()?;
        row.ends.push(row.bytes.len());
        at += 4 + len as u64;
    }
    Some(row)
}

#[cfg(test)]
mod tests;
