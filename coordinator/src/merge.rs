//! One step's merge: every agent's interval reports added into the step's totals as they arrive, at a
//! cost proportional to what the agents recorded, not to the histograms' size or the number of agents
//! times it. `run_step` owns the fleet and the loss policy and feeds this; this owns the merged state.
//!
//! Memory: the fleet's five total histograms (and two per named request), counters per agent and per
//! interval, and per report only where its latency lies in the step's spill (16 bytes, and 16 more for
//! its named requests' latencies, spilled together as one frame). The latency itself (checked V2 bytes, a
//! few KB per report: 160 MB for a minute of 1,000 agents) is written to an anonymous temporary file
//! as it arrives, through a 256 KB buffer, and read back when it is needed: an interval's reports for
//! its progress line and an agent's at `finish`, one report at a time into one scratch histogram, and
//! an interval's at once while its .hlog lines are written (the named requests' .hlog files likewise,
//! a batch of names at a time). So at most one interval's bytes are held, however long the step. No
//! agent's histograms are kept decoded.
//!
//! The spill is an unnamed file in the run's output directory, which the run has already found
//! writable and which is sized for results (a container's root and `/tmp` are often read-only, and
//! `TMPDIR` may be a small tmpfs). On a disk the kernel's page cache keeps what is recent and none of
//! it counts in the coordinator's RSS; on a tmpfs it is memory after all.
use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use proto::{ConvertError, pb};
use results::step::{IntervalSample, LatencyStats};
use shared::histogram::{CodecError, Encoded, Histogram, Merger};
use shared::metrics::{
    Counters, EncodedInterval, EncodedName, ErrorClass, FirstErrors, HistogramSums, NameSums,
    Snapshot,
};
use shared::plan::{LoadModel, StepShare};
use shared::status::StatusCodes;

use crate::output::{HlogInterval, NamesInterval};

/// The step's latency spill failed: the coordinator's own trouble (a full or unwritable temporary
/// directory), not an agent's.
#[derive(Debug, thiserror::Error)]
pub enum SpillError {
    #[error("cannot create a temporary file in {dir} for the step's latency histograms: {source}")]
    Create { dir: PathBuf, source: io::Error },
    #[error(
        "cannot write the step's latency histograms to their temporary file in {dir}: {source}; free space there"
    )]
    Write { dir: PathBuf, source: io::Error },
    #[error(
        "cannot read the step's latency histograms back from their temporary file in {dir}: {source}"
    )]
    Read { dir: PathBuf, source: io::Error },
    #[error(
        "a latency histogram read back from the step's temporary file in {dir} is damaged: {source}"
    )]
    Damaged { dir: PathBuf, source: CodecError },
}

/// Why a report was not merged.
#[derive(Debug, thiserror::Error)]
pub enum IntervalError {
    /// The agent's: the report does not convert (a protocol error).
    #[error(transparent)]
    Report(#[from] ConvertError),
    /// Ours: its latency could not be kept.
    #[error(transparent)]
    Spill(#[from] SpillError),
}

/// Slack over what a share had due: arrivals are paced on the agent's clock and its reports cross a
/// network, so a count a little past the schedule is honest; one ten percent past it is not.
const CLAIM_SLACK: f64 = 1.1;
/// Arrivals any share may claim beyond its rate: each worker's first comes at the step's first
/// instant. Counted in arrivals (a `connections` arrival brings its `num_call` requests), never a
/// fixed number of requests: 1,000 of them let a share due 10 req/s claim 262/s.
const CLAIM_FLOOR_ARRIVALS: u64 = 64;
/// A closed loop's requests per second per connection that no real server answers (a keep-alive reply
/// over loopback takes tens of microseconds): the ceiling of a model without a rate.
const CLOSED_PER_CONNECTION: f64 = 200_000.0;
/// Bytes or CPU nanoseconds one interval can carry (2^48: 256 TiB, or 78 hours of CPU): a value past
/// it cannot be real, and sums of values below it cannot wrap.
const CLAIM_MAX_UNITS: u64 = 1 << 48;

/// The most requests an agent's share of a step can account for by a time into it: what was due, with
/// slack. A report past it is not believed: the agent is dropped, and its report not merged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShareBound {
    /// Requests per second at most: the share's rate (open models) or its connections' ceiling.
    per_sec: f64,
    /// The share's own request count (the concurrency model's `-n`), if it has one.
    total: Option<u64>,
    /// Requests one arrival brings: [`CLAIM_FLOOR_ARRIVALS`] of them are the floor.
    per_arrival: u64,
}

impl ShareBound {
    pub fn of(share: &StepShare) -> ShareBound {
        let fraction = share.slice().fraction();
        let per_sec = match share.model() {
            LoadModel::Connections => share.rate() * fraction * f64::from(share.num_call().get()),
            LoadModel::Requests => share.rate() * fraction,
            LoadModel::Concurrency => f64::from(share.connections()) * CLOSED_PER_CONNECTION,
        };
        let per_arrival = match share.model() {
            LoadModel::Connections => u64::from(share.num_call().get()),
            LoadModel::Requests | LoadModel::Concurrency => 1,
        };
        ShareBound {
            per_sec,
            total: share.max_requests().map(|n| n.get()),
            per_arrival,
        }
    }

    /// Requests (sent or due) the share allows by `elapsed` into the step.
    pub fn allows(&self, elapsed: Duration) -> u64 {
        // A float past u64's range saturates in the cast: never a wrap.
        let due = (self.per_sec * elapsed.as_secs_f64() * CLAIM_SLACK) as u64;
        let floor = self.per_arrival.saturating_mul(CLAIM_FLOOR_ARRIVALS);
        let due = due.saturating_add(floor);
        match self.total {
            Some(n) => due.min(n.saturating_add(floor)),
            None => due,
        }
    }
}

/// Checks one report of an agent against what it reported before in the step (`so_far`) and what its
/// share allows by now (`allowed`, [`ShareBound::allows`]), before anything is merged: sums are
/// checked, so a report that lies (more requests than were due, more replies than requests, a counter
/// no link carries) is refused in words, and no total can wrap.
pub fn check_claim(
    so_far: &Counters,
    report: &pb::IntervalReport,
    allowed: u64,
) -> Result<(), String> {
    let Some(c) = report.counters.as_ref() else {
        // Refused by the conversion, as a protocol error.
        return Ok(());
    };
    let past = || "counters past 2^64: no agent sends that many".to_string();
    let sum = |a: u64, b: u64| a.checked_add(b).ok_or_else(past);
    let sent = sum(
        sum(so_far.requests, so_far.unsent)?,
        sum(c.requests, c.unsent)?,
    )?;
    if sent > allowed {
        return Err(format!(
            "it claims {sent} requests sent or due so far, where its share allows at most {allowed}"
        ));
    }
    let requests = sum(so_far.requests, c.requests)?;
    let replies = sum(so_far.replies, c.replies)?;
    let ok = sum(so_far.ok, c.ok)?;
    if replies > requests || ok > replies {
        return Err(format!(
            "it claims {ok} served of {replies} replies to {requests} requests so far"
        ));
    }
    // Every other count is bounded by the requests: generously, as connections and errors may
    // outnumber them a little (a connect refused, then the request given up).
    let ceiling = allowed.saturating_mul(4);
    let counts = [
        c.connections,
        c.waited,
        c.dropped,
        c.given_up,
        c.abandoned,
        c.refused_streams,
        c.goaways,
        c.stream_resets,
        c.window_stalls,
        c.drained,
        c.tls_full,
        c.tls_resumed,
        c.sessions_started,
        c.sessions_completed,
        c.sessions_abandoned,
        c.setups,
        c.setup_failed,
    ]
    .into_iter();
    let named = report
        .names
        .iter()
        .flat_map(|n| n.counters.as_ref())
        .flat_map(|n| {
            [n.requests, n.replies, n.given_up, n.unsent]
                .into_iter()
                .chain(n.status.iter().chain(&n.errors).copied())
        });
    let mut classes = c.status.iter().chain(&c.errors).copied().chain(named);
    if let Some(n) = counts.chain(&mut classes).find(|&n| n > ceiling) {
        return Err(format!(
            "it claims a count of {n} in one interval, where its share allows at most {ceiling}"
        ));
    }
    let units = [
        c.bytes_in,
        c.bytes_out,
        c.header_bytes_in,
        c.body_bytes_in,
        c.window_stall_us,
        report.cpu_ns,
    ];
    if let Some(n) = units.into_iter().find(|&n| n > CLAIM_MAX_UNITS) {
        return Err(format!(
            "it claims {n} bytes or CPU nanoseconds in one interval, more than any agent can"
        ));
    }
    Ok(())
}

/// Where one report's latency lies in the spill, and whose it is. 16 bytes, kept per report.
#[derive(Debug, Clone, Copy)]
struct Slot {
    at: u64,
    len: u32,
    agent: u32,
}

/// The step's latency bytes, appended to an anonymous temporary file (gone when it is dropped, or
/// when the process dies) and read back by position. The newest bytes wait in a small buffer and go
/// out in one write when it fills: one system call per ~100 reports rather than per report, and an
/// interval's progress line, read just after its reports arrived, mostly reads from memory.
struct Spill {
    file: File,
    /// Bytes not yet written, which belong at `written` in the file.
    pending: Vec<u8>,
    written: u64,
    /// How much `pending` may hold before it is written.
    buffer: usize,
    /// Where the file is, for messages: an anonymous file has no name.
    dir: PathBuf,
    /// Reused to build a report's frame of named latencies.
    frame: Vec<u8>,
}

/// The spill's buffer: about a hundred reports of a few KB, a fixed cost whatever the fleet.
const SPILL_BUFFER: usize = 256 * 1024;

impl Spill {
    fn new(dir: &Path) -> Result<Spill, SpillError> {
        match tempfile::tempfile_in(dir) {
            Ok(file) => Ok(Spill::in_file(file, dir.to_path_buf(), SPILL_BUFFER)),
            Err(source) => Err(SpillError::Create {
                dir: dir.to_path_buf(),
                source,
            }),
        }
    }

    fn in_file(file: File, dir: PathBuf, buffer: usize) -> Spill {
        Spill {
            file,
            pending: Vec::with_capacity(buffer),
            written: 0,
            buffer,
            dir,
            frame: Vec::new(),
        }
    }

    /// Appends `h`'s bytes. A failed write changes nothing (the buffer is kept and written again at
    /// the same place next time), so it is as if never tried.
    fn append(&mut self, agent: usize, h: &Encoded) -> Result<Slot, SpillError> {
        self.push(agent, h.as_bytes())
    }

    /// Appends one report's named requests' latencies as one frame: per name its index (u16), its
    /// length (u32, little-endian) and its V2 bytes. One slot per report however many names, so the
    /// index kept in memory does not grow with the names.
    fn append_names(&mut self, agent: usize, names: &[EncodedName]) -> Result<Slot, SpillError> {
        let mut frame = std::mem::take(&mut self.frame);
        frame.clear();
        for n in names {
            let bytes = n.latency.as_bytes();
            // A checked histogram is at most 9 bytes per bucket of ~2^25: this never fails.
            let Ok(len) = u32::try_from(bytes.len()) else {
                self.frame = frame;
                return Err(SpillError::Write {
                    dir: self.dir.clone(),
                    source: io::Error::other("a histogram of more than 4 GB"),
                });
            };
            frame.extend_from_slice(&n.index.to_le_bytes());
            frame.extend_from_slice(&len.to_le_bytes());
            frame.extend_from_slice(bytes);
        }
        let slot = self.push(agent, &frame);
        self.frame = frame;
        slot
    }

    fn push(&mut self, agent: usize, bytes: &[u8]) -> Result<Slot, SpillError> {
        let write = |source| SpillError::Write {
            dir: self.dir.clone(),
            source,
        };
        // A checked histogram is at most 9 bytes per bucket of a shape of at most ~2^25 buckets.
        let len = u32::try_from(bytes.len())
            .map_err(|_| write(io::Error::other("a histogram of more than 4 GB")))?;
        if !self.pending.is_empty() && self.pending.len() + bytes.len() > self.buffer {
            self.file
                .write_all_at(&self.pending, self.written)
                .map_err(write)?;
            self.written += self.pending.len() as u64;
            self.pending.clear();
        }
        let slot = Slot {
            at: self.written + self.pending.len() as u64,
            len,
            // A fleet index: one gRPC stream per agent, far fewer than 2^32.
            agent: u32::try_from(agent).expect("fewer than 2^32 agents"),
        };
        self.pending.extend_from_slice(bytes);
        Ok(slot)
    }

    /// One report's latency, as it arrived. Parsed again rather than trusted: the walk costs less
    /// than adding it does (no end-to-end difference measured with merge_scale), and a damaged file
    /// then is an error, never a wrong merge or a panic.
    fn read(&self, slot: &Slot) -> Result<Encoded, SpillError> {
        Encoded::parse(self.read_bytes(slot)?).map_err(|source| self.damaged(source))
    }

    /// One report's named latencies (its frame, [`Spill::append_names`]), those of the names in
    /// `keep` only, each parsed again as [`Spill::read`] does.
    fn read_names(
        &self,
        slot: &Slot,
        keep: &std::ops::Range<usize>,
    ) -> Result<Vec<(usize, Encoded)>, SpillError> {
        let frame = self.read_bytes(slot)?;
        let cut = || self.damaged(CodecError::Decode("a named request's frame is cut".into()));
        let mut out = Vec::new();
        let mut at = 0;
        while at < frame.len() {
            let head = frame.get(at..at + 6).ok_or_else(cut)?;
            let index = usize::from(u16::from_le_bytes([head[0], head[1]]));
            let len = u32::from_le_bytes([head[2], head[3], head[4], head[5]]) as usize;
            let bytes = frame.get(at + 6..at + 6 + len).ok_or_else(cut)?;
            at += 6 + len;
            if keep.contains(&index) {
                let e = Encoded::parse(bytes.to_vec()).map_err(|source| self.damaged(source))?;
                out.push((index, e));
            }
        }
        Ok(out)
    }

    fn damaged(&self, source: CodecError) -> SpillError {
        SpillError::Damaged {
            dir: self.dir.clone(),
            source,
        }
    }

    /// A slot's bytes, from the buffer or the file.
    fn read_bytes(&self, slot: &Slot) -> Result<Vec<u8>, SpillError> {
        let len = slot.len as usize;
        let bytes = match slot.at.checked_sub(self.written) {
            // Still in the buffer (always whole there: a report is never split across a write).
            Some(from) => {
                let from = from as usize;
                self.pending
                    .get(from..from + len)
                    .ok_or_else(|| SpillError::Read {
                        dir: self.dir.clone(),
                        source: io::Error::other("a slot past the end of the spill"),
                    })?
                    .to_vec()
            }
            None => {
                let mut bytes = vec![0; len];
                self.file
                    .read_exact_at(&mut bytes, slot.at)
                    .map_err(|source| SpillError::Read {
                        dir: self.dir.clone(),
                        source,
                    })?;
                bytes
            }
        };
        Ok(bytes)
    }

    /// The merge of `slots`, read one at a time, so no more than one report's bytes are held.
    fn merge<'m>(
        &self,
        merger: &'m mut Merger,
        slots: &[Slot],
    ) -> Result<&'m Histogram<u64>, SpillError> {
        let mut failed = None;
        let merged = merger.merge(
            slots
                .iter()
                .map_while(|s| self.read(s).map_err(|e| failed = Some(e)).ok()),
        );
        match failed {
            Some(e) => Err(e),
            None => Ok(merged),
        }
    }
}

/// What one agent contributed to the step, beyond its latency bytes.
#[derive(Debug, Clone, Copy, Default)]
struct AgentSums {
    counters: Counters,
    cpu_ns: u64,
}

/// One interval (`seq`) of the fleet.
#[derive(Default)]
struct Seq {
    offset: Duration,
    length: Duration,
    tail: bool,
    reports: usize,
    counters: Counters,
    /// Each report's latency in the spill, in arrival order: for progress, per-agent statistics and
    /// the .hlog.
    latency: Vec<Slot>,
    /// Each report's named latencies (one frame a report that has any), for the names' .hlog files.
    names: Vec<Slot>,
}

/// The merge of one step over a fleet of `agents` (indexed as the fleet indexes them).
pub struct StepMerge {
    counters: Counters,
    codes: StatusCodes,
    cpu_ns: u64,
    hist: HistogramSums,
    /// Each named request's row (none when the requests are unnamed).
    names: Vec<NameSums>,
    agents: Vec<AgentSums>,
    seqs: BTreeMap<u32, Seq>,
    spill: Spill,
    /// Reused for every latency merged only to be read (progress, per-agent statistics).
    scratch: Merger,
    /// Each error class's first message: from the earliest interval, then the first agent in the
    /// fleet's order, whatever order the reports arrive in.
    first: [Option<(FirstKey, String)>; ErrorClass::COUNT],
}

/// Which report a first message came from: (interval, agent), compared in that order.
type FirstKey = (u32, usize);

/// What one report changed: its interval, and how many reports of it have arrived so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Merged {
    pub seq: u32,
    pub reports: usize,
    pub tail: bool,
}

/// One interval of the fleet as the progress line shows it.
#[derive(Debug, Clone, Copy)]
pub struct SeqProgress {
    pub offset: Duration,
    pub length: Duration,
    pub counters: Counters,
    pub p50_us: u64,
    pub p99_us: u64,
    /// How many latencies the interval's merge holds (0: its percentiles mean nothing).
    pub measured: u64,
}

/// One agent's step, as the summary takes it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AgentTotals {
    pub counters: Counters,
    pub cpu_ns: u64,
    pub latency_ms: LatencyStats,
}

/// A finished step's merge: what `summarize` and the .hlog writer need.
pub struct StepTotals {
    pub total: Snapshot,
    /// The full (non-tail) intervals in order, for the reply-rate series.
    pub series: Vec<IntervalSample>,
    /// Indexed like the fleet; an agent that sent nothing has zeros.
    pub agents: Vec<AgentTotals>,
    pub hlog: Hlog,
}

/// The step's latency per interval for the .hlog, still in the spill: [`Hlog::intervals`] reads one
/// interval at a time as the writer asks for it. Dropping it removes the spill.
pub struct Hlog {
    spill: Spill,
    intervals: Vec<HlogSlots>,
    /// The workload's named requests (0 when unnamed).
    names: usize,
}

struct HlogSlots {
    offset: Duration,
    length: Duration,
    latency: Vec<Slot>,
    names: Vec<Slot>,
}

impl Hlog {
    /// The intervals in order, each read back when the iterator reaches it.
    pub fn intervals(&self) -> impl Iterator<Item = Result<HlogInterval, SpillError>> + '_ {
        self.intervals.iter().map(|i| {
            let per_agent = i
                .latency
                .iter()
                .map(|s| Ok((s.agent as usize, self.spill.read(s)?)))
                .collect::<Result<_, SpillError>>()?;
            Ok(HlogInterval {
                offset: i.offset,
                length: i.length,
                per_agent,
            })
        })
    }

    /// The intervals in order, for the named requests in `names` only: each interval's frames read
    /// back when the iterator reaches it, and every report's latency of those names kept, by name.
    /// A batch of names at a time bounds what is held to an interval's bytes of that batch.
    pub fn name_intervals(
        &self,
        names: std::ops::Range<usize>,
    ) -> impl Iterator<Item = Result<NamesInterval, SpillError>> + '_ {
        let names = names.start.min(self.names)..names.end.min(self.names);
        self.intervals.iter().map(move |i| {
            let mut per_name: Vec<Vec<Encoded>> = vec![Vec::new(); names.len()];
            for s in &i.names {
                for (index, e) in self.spill.read_names(s, &names)? {
                    per_name[index - names.start].push(e);
                }
            }
            Ok(NamesInterval {
                offset: i.offset,
                length: i.length,
                per_name,
            })
        })
    }

    /// How many named requests the step has (0 when its requests are unnamed).
    pub fn names(&self) -> usize {
        self.names
    }

    pub fn len(&self) -> usize {
        self.intervals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }
}

impl StepMerge {
    /// Creates the step's spill file in `dir` (the run's output directory), which is the only thing
    /// that can fail here.
    pub fn new(agents: usize, dir: &Path) -> Result<StepMerge, SpillError> {
        Ok(StepMerge::with_spill(agents, Spill::new(dir)?))
    }

    /// Keeps a row for each of the workload's `names` requests: a report's row past them is refused.
    pub fn with_names(mut self, names: usize) -> StepMerge {
        self.names = vec![NameSums::default(); names];
        self
    }

    fn with_spill(agents: usize, spill: Spill) -> StepMerge {
        StepMerge {
            counters: Counters::default(),
            codes: StatusCodes::default(),
            cpu_ns: 0,
            hist: HistogramSums::default(),
            names: Vec::new(),
            agents: vec![AgentSums::default(); agents],
            seqs: BTreeMap::new(),
            spill,
            scratch: Merger::default(),
            first: Default::default(),
        }
    }

    /// Adds agent `agent`'s report. A report that does not convert (a malformed or out-of-range
    /// histogram, missing counters) changes nothing and is the caller's protocol error; nor does one
    /// whose latency cannot be spilled, which is the coordinator's.
    pub fn interval(
        &mut self,
        agent: usize,
        report: pb::IntervalReport,
    ) -> Result<Merged, IntervalError> {
        // Everything is checked and kept here, before anything is added, so a bad report leaves no
        // trace.
        let i = EncodedInterval::try_from(report)?;
        if i.names
            .iter()
            .any(|n| usize::from(n.index) >= self.names.len())
        {
            return Err(ConvertError::Invalid(
                "a named request's row past the workload's requests",
            )
            .into());
        }
        let slot = self.spill.append(agent, &i.hist.latency)?;
        let names_slot = match i.names.is_empty() {
            true => None,
            false => Some(self.spill.append_names(agent, &i.names)?),
        };
        self.counters.add(&i.counters);
        self.codes.add(&i.codes);
        self.cpu_ns += i.cpu_ns;
        self.hist.add(&i.hist);
        for n in &i.names {
            self.names[usize::from(n.index)].add(n);
        }
        let sums = &mut self.agents[agent];
        sums.counters.add(&i.counters);
        sums.cpu_ns += i.cpu_ns;
        let seq = self.seqs.entry(i.seq).or_default();
        seq.offset = i.offset;
        seq.length = seq.length.max(i.length);
        seq.tail |= i.tail;
        seq.reports += 1;
        seq.counters.add(&i.counters);
        seq.latency.push(slot);
        seq.names.extend(names_slot);
        let key = (i.seq, agent);
        for (class, text) in i.messages.iter() {
            let first = &mut self.first[class.index()];
            if first.as_ref().is_none_or(|(k, _)| key < *k) {
                *first = Some((key, text.to_string()));
            }
        }
        Ok(Merged {
            seq: i.seq,
            reports: seq.reports,
            tail: seq.tail,
        })
    }

    /// Agent `agent`'s counters so far in the step.
    pub fn agent_counters(&self, agent: usize) -> &Counters {
        &self.agents[agent].counters
    }

    /// The step's counters so far, summed over every report.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Interval `seq` as it stands: its counters and its merged latency's p50 and p99, the merged
    /// latency shown to `see` as well. Reads that interval's reports back and merges them again, so
    /// call it once, when the interval is complete and someone is watching.
    pub fn progress(
        &mut self,
        seq: u32,
        see: impl FnOnce(&Histogram<u64>),
    ) -> Result<Option<SeqProgress>, SpillError> {
        let Some(s) = self.seqs.get(&seq) else {
            return Ok(None);
        };
        let merged = self.spill.merge(&mut self.scratch, &s.latency)?;
        see(merged);
        Ok(Some(SeqProgress {
            offset: s.offset,
            length: s.length,
            counters: s.counters,
            p50_us: merged.value_at_quantile(0.50),
            p99_us: merged.value_at_quantile(0.99),
            measured: merged.len(),
        }))
    }

    pub fn finish(self) -> Result<StepTotals, SpillError> {
        let StepMerge {
            counters,
            codes,
            cpu_ns,
            hist,
            names,
            agents,
            seqs,
            spill,
            mut scratch,
            first,
        } = self;
        let mut messages = FirstErrors::default();
        for (class, first) in ErrorClass::ALL.into_iter().zip(first) {
            if let Some((_, text)) = first {
                messages.keep(class, || text.into());
            }
        }
        let total = Snapshot {
            counters,
            hist: hist.to_histograms(),
            codes,
            cpu_ns,
            messages,
            names: names.iter().map(NameSums::to_stats).collect(),
        };
        // Each agent's slots, in interval order: a copy of the index (16 bytes a report), not of the
        // latency.
        let mut latency: Vec<Vec<Slot>> = vec![Vec::new(); agents.len()];
        for s in seqs.values() {
            for slot in &s.latency {
                latency[slot.agent as usize].push(*slot);
            }
        }
        let agents = agents
            .iter()
            .zip(&latency)
            .map(|(sums, latency)| {
                Ok(AgentTotals {
                    counters: sums.counters,
                    cpu_ns: sums.cpu_ns,
                    latency_ms: LatencyStats::of(spill.merge(&mut scratch, latency)?),
                })
            })
            .collect::<Result<_, SpillError>>()?;
        drop(latency);
        let series = seqs
            .values()
            .filter(|s| !s.tail)
            .map(|s| IntervalSample {
                length: s.length,
                replies: s.counters.replies,
            })
            .collect();
        let intervals = seqs
            .into_values()
            .map(|s| HlogSlots {
                offset: s.offset,
                length: s.length,
                latency: s.latency,
                names: s.names,
            })
            .collect();
        Ok(StepTotals {
            total,
            series,
            agents,
            hlog: Hlog {
                spill,
                intervals,
                names: names.len(),
            },
        })
    }
}

#[cfg(test)]
mod tests;
