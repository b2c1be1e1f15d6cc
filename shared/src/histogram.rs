//! Latency histograms: one shape everywhere (microseconds, 1 us to 1 h, 3 significant digits) so any two
//! can be added, and the V2 codec they travel in.
//!
//! A receiver that only merges does not decode: [`Encoded`] checks V2 bytes once, and its counts are
//! then added straight into a [`Sum`] (or a histogram), at a cost proportional to what was recorded
//! rather than to the shape's ~23k buckets, and without allocating a histogram per report. Both are
//! equal to `decode` + `add`, which stays the reference (and what the property tests compare with).
use std::borrow::Borrow;
use std::io::Read;

pub use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};

/// Highest trackable value: one hour in microseconds. Larger values saturate.
pub const HIGHEST_US: u64 = 3_600_000_000;
/// The one shape's lowest discernible value and significant digits.
const LOWEST_US: u64 = 1;
const SIGFIG: u8 = 3;

/// HdrHistogram's V2 cookies, plain and DEFLATE-compressed, and the plain header's size.
const V2_COOKIE: u32 = 0x1c84_9313;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9314;
const V2_HEADER: usize = 40;

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("histogram does not decode: {0}")]
    Decode(String),
    #[error(
        "histogram tracks values up to {found} us, more than the {HIGHEST_US} us stampede records"
    )]
    Range { found: u64 },
}

fn malformed(why: impl Into<String>) -> CodecError {
    CodecError::Decode(why.into())
}

/// A new, empty histogram of the one shape stampede uses.
pub fn new() -> Histogram<u64> {
    Histogram::new_with_bounds(LOWEST_US, HIGHEST_US, SIGFIG).expect("constant bounds are valid")
}

/// The width of the bucket holding `value_us` in the one shape, in microseconds: two values closer
/// than this may be one bucket, so a difference below it is nothing the histogram measured. 3
/// significant digits keep 2048 sub-buckets per power of two: 1 us up to 2,048 us, then doubling.
/// Computed, not looked up, so a comparison need not build a histogram (equal to
/// `Histogram::equivalent_range`, which the tests check).
pub fn resolution_us(value_us: u64) -> u64 {
    let v = value_us.clamp(LOWEST_US, HIGHEST_US);
    // The sub-bucket count for SIGFIG = 3: the power of two at or above 2 x 10^3.
    const SUB_BUCKET_BITS: u32 = 11;
    let magnitude = (u64::BITS - 1 - v.leading_zeros()).saturating_sub(SUB_BUCKET_BITS - 1);
    1 << magnitude
}

/// Serializes with the standard HdrHistogram V2 encoding (no compression).
pub fn encode(h: &Histogram<u64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    V2Serializer::new()
        .serialize(h, &mut out)
        .expect("writing to a Vec cannot fail");
    out
}

/// Decodes V2 bytes (as sent by an agent) into a histogram that can be added to one from [`new`].
pub fn decode(bytes: &[u8]) -> Result<Histogram<u64>, CodecError> {
    if bytes.is_empty() {
        return Ok(new());
    }
    let h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .map_err(|e| CodecError::Decode(format!("{e:?}")))?;
    if h.high() > HIGHEST_US * 2 {
        return Err(CodecError::Range { found: h.high() });
    }
    if h.low() == LOWEST_US && h.high() == HIGHEST_US && h.sigfig() == SIGFIG {
        return Ok(h);
    }
    // Re-home into the canonical shape so that `add` can never fail later.
    let mut canon = new();
    for v in h.iter_recorded() {
        canon.saturating_record_n(v.value_iterated_to(), v.count_at_value());
    }
    Ok(canon)
}

/// Adds `from` into `into`; both come from [`new`] or [`decode`], so the shapes match.
pub fn add(into: &mut Histogram<u64>, from: &Histogram<u64>) {
    into.add(from).expect("histograms share one shape");
}

/// V2 bytes from a peer, checked once on receipt: every later [`Encoded::add_to`] is infallible and
/// walks only the encoded counts. Holds the plain V2 bytes (a compressed payload is inflated here), so
/// keeping one costs what the agent recorded, not a full histogram.
#[derive(Debug, Clone)]
pub struct Encoded {
    bytes: Vec<u8>,
    form: Form,
}

#[derive(Debug, Clone, Copy)]
enum Form {
    /// No bytes: an empty histogram (what an agent that recorded nothing may send).
    Empty,
    /// Plain V2 in `shape`; the counts are `bytes[V2_HEADER..end]`.
    Plain { shape: Shape, end: usize },
}

impl Encoded {
    /// Checks everything [`decode`] checks (header, shape, range, every count's index) without
    /// building a histogram. What it accepts adds into [`new`]'s shape exactly as `decode` + [`add`].
    pub fn parse(bytes: Vec<u8>) -> Result<Encoded, CodecError> {
        if bytes.is_empty() {
            return Ok(Encoded {
                bytes,
                form: Form::Empty,
            });
        }
        match be_u32(&bytes, 0)? {
            V2_COOKIE => {
                let (shape, payload_len) = header(&bytes)?;
                let end = V2_HEADER
                    .checked_add(payload_len)
                    .filter(|&end| end <= bytes.len())
                    .ok_or_else(|| malformed("the counts are shorter than the header says"))?;
                walk(&bytes[V2_HEADER..end], shape.len, |_, _| {})?;
                Ok(Encoded {
                    bytes,
                    form: Form::Plain { shape, end },
                })
            }
            V2_COMPRESSED_COOKIE => Encoded::parse(inflate(&bytes)?),
            cookie => Err(malformed(format!(
                "not an HdrHistogram V2 encoding (cookie {cookie:#010x})"
            ))),
        }
    }

    /// The plain V2 bytes as checked (a compressed encoding inflated): what [`Encoded::parse`] accepts
    /// again, for a holder that keeps them elsewhere than in memory (the coordinator's spill file).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Adds the counts into `into` (of [`new`]'s shape), as `add(into, &decode(bytes)?)` would.
    pub fn add_to(&self, into: &mut Histogram<u64>) {
        let Form::Plain { shape, end } = self.form else {
            return;
        };
        // Each count is recorded at a value of its bucket, which lands in the same bucket of the
        // canonical shape; a foreign shape's bucket is re-homed at its highest value, as `decode`
        // does, clamped to the canonical range.
        let walked = walk(&self.bytes[V2_HEADER..end], shape.len, |index, count| {
            if count > 0 {
                into.saturating_record_n(shape.highest_equivalent(shape.value_for(index)), count);
            }
        });
        debug_assert!(walked.is_ok(), "checked by parse");
    }
}

/// A [`Sum`] and a histogram to read it through, reused so that reading merged or single encoded
/// histograms allocates nothing (progress lines, per-agent statistics, .hlog lines).
#[derive(Debug, Clone)]
pub struct Merger {
    sum: Sum,
    hist: Histogram<u64>,
}

impl Default for Merger {
    fn default() -> Self {
        Merger {
            sum: Sum::new(),
            hist: new(),
        }
    }
}

impl Merger {
    /// The merge of `histograms`, as a histogram. They may be borrowed or owned: a caller that reads
    /// them from elsewhere one at a time need not hold them all.
    pub fn merge(
        &mut self,
        histograms: impl IntoIterator<Item = impl Borrow<Encoded>>,
    ) -> &Histogram<u64> {
        self.sum.clear();
        for h in histograms {
            self.sum.add(h.borrow());
        }
        self.hist.reset();
        self.sum.add_into(&mut self.hist);
        &self.hist
    }

    /// One encoded histogram, as a histogram.
    pub fn one(&mut self, h: &Encoded) -> &Histogram<u64> {
        self.hist.reset();
        h.add_to(&mut self.hist);
        &self.hist
    }
}

/// The bucket counts of the one shape, summed straight from [`Encoded`] histograms: the merge's
/// accumulator. Adding is a pass over the encoded counts with a plain add per bucket (no decoding,
/// no per-count bookkeeping); [`Sum::add_into`] turns it into a histogram once, when it is read.
/// Equal, count for count and in total, min and max, to decoding each and [`add`]ing them.
#[derive(Debug, Clone)]
pub struct Sum {
    counts: Vec<u64>,
    shape: Shape,
}

impl Default for Sum {
    fn default() -> Self {
        Sum::new()
    }
}

impl Sum {
    pub fn new() -> Sum {
        let shape = Shape::new(LOWEST_US, HIGHEST_US, SIGFIG).expect("constant bounds are valid");
        Sum {
            counts: vec![0; shape.len],
            shape,
        }
    }

    pub fn add(&mut self, e: &Encoded) {
        let Form::Plain { shape, end } = e.form else {
            return;
        };
        let payload = &e.bytes[V2_HEADER..end];
        let counts = &mut self.counts;
        let last = counts.len() - 1;
        let walked = if shape == self.shape {
            // Same buckets: index for index. Zero counts (and runs past the end) add nothing to a
            // clamped index, which keeps this loop free of unpredictable branches.
            walk(payload, shape.len, |index, count| {
                let c = &mut counts[index.min(last)];
                *c = c.saturating_add(count);
            })
        } else {
            // Re-homed at each bucket's highest value, clamped to the range, as `decode` does.
            let canonical = self.shape;
            walk(payload, shape.len, |index, count| {
                if count > 0 {
                    let value = shape.highest_equivalent(shape.value_for(index));
                    let at = canonical
                        .index_for(value)
                        .filter(|&i| i <= last)
                        .unwrap_or_else(|| {
                            canonical
                                .index_for(HIGHEST_US)
                                .expect("the highest value has a bucket")
                        });
                    counts[at] = counts[at].saturating_add(count);
                }
            })
        };
        debug_assert!(walked.is_ok(), "checked by parse");
    }

    /// Empties it, keeping its memory.
    pub fn clear(&mut self) {
        self.counts.fill(0);
    }

    /// Adds the sum into `into` (of [`new`]'s shape); into an empty one, that makes it the histogram.
    pub fn add_into(&self, into: &mut Histogram<u64>) {
        for (index, &count) in self.counts.iter().enumerate() {
            if count > 0 {
                // Lands in the same bucket; its recording keeps hdrhistogram's min, max and total.
                into.saturating_record_n(self.shape.value_for(index), count);
            }
        }
    }

    pub fn to_histogram(&self) -> Histogram<u64> {
        let mut h = new();
        self.add_into(&mut h);
        h
    }
}

fn be_u32(b: &[u8], at: usize) -> Result<u32, CodecError> {
    b.get(at..at + 4)
        .map(|s| u32::from_be_bytes(s.try_into().expect("4 bytes")))
        .ok_or_else(|| malformed("the header is truncated"))
}

fn be_u64(b: &[u8], at: usize) -> Result<u64, CodecError> {
    b.get(at..at + 8)
        .map(|s| u64::from_be_bytes(s.try_into().expect("8 bytes")))
        .ok_or_else(|| malformed("the header is truncated"))
}

/// The plain V2 header after the cookie: the shape (checked as hdrhistogram checks it, and against
/// stampede's range) and the length of the counts.
fn header(b: &[u8]) -> Result<(Shape, usize), CodecError> {
    let payload_len = be_u32(b, 4)? as usize;
    if be_u32(b, 8)? != 0 {
        return Err(malformed("a normalizing index offset is not supported"));
    }
    let sigfig = u8::try_from(be_u32(b, 12)?)
        .map_err(|_| malformed("the significant digits are out of range"))?;
    let low = be_u64(b, 16)?;
    let high = be_u64(b, 24)?;
    if f64::from_bits(be_u64(b, 32)?) != 1.0 {
        return Err(malformed(
            "an integer-to-double ratio other than 1 is not supported",
        ));
    }
    let shape = Shape::new(low, high, sigfig)?;
    // After the shape check, as `decode` (which builds the histogram first) orders them.
    if high > HIGHEST_US * 2 {
        return Err(CodecError::Range { found: high });
    }
    Ok((shape, payload_len))
}

/// Inflates a compressed V2 encoding into the plain one. The inflated counts are bounded by what a
/// histogram of the declared shape can hold (9 bytes per bucket), so a small message cannot claim
/// gigabytes.
fn inflate(b: &[u8]) -> Result<Vec<u8>, CodecError> {
    let len = be_u32(b, 4)? as usize;
    let deflated = b
        .get(8..)
        .map(|rest| &rest[..len.min(rest.len())])
        .unwrap_or_default();
    let mut z = flate2::read::ZlibDecoder::new(deflated);
    let mut plain = vec![0u8; V2_HEADER];
    z.read_exact(&mut plain)
        .map_err(|e| malformed(format!("compressed histogram does not inflate: {e}")))?;
    if be_u32(&plain, 0)? != V2_COOKIE {
        return Err(malformed("the compressed histogram is not a V2 encoding"));
    }
    let (shape, payload_len) = header(&plain)?;
    if payload_len > shape.len.saturating_mul(9) {
        return Err(malformed(
            "the compressed histogram's counts are longer than its shape can hold",
        ));
    }
    plain.resize(V2_HEADER + payload_len, 0);
    z.read_exact(&mut plain[V2_HEADER..])
        .map_err(|e| malformed(format!("compressed histogram does not inflate: {e}")))?;
    Ok(plain)
}

/// hdrhistogram's V2 + DEFLATE serializer (the .hlog's line encoding), with one compressor kept and
/// reset between histograms. The library's `V2DeflateSerializer` builds a new compressor, a few hundred
/// KB, for every line; with nothing else that large on the heap, glibc gives the memory back and maps
/// it again each time, which made a small fleet's .hlog take almost twice as long to write (25 ms
/// against 15 for 10 agents over 10 s). Same bytes.
pub struct Deflater {
    v2: V2Serializer,
    plain: Vec<u8>,
    packed: Vec<u8>,
    zlib: flate2::Compress,
}

impl Default for Deflater {
    fn default() -> Self {
        Deflater {
            v2: V2Serializer::new(),
            plain: Vec::new(),
            packed: Vec::new(),
            zlib: flate2::Compress::new(flate2::Compression::default(), true),
        }
    }
}

impl Serializer for Deflater {
    type SerializeError = std::io::Error;

    fn serialize<T: hdrhistogram::Counter, W: std::io::Write>(
        &mut self,
        h: &Histogram<T>,
        writer: &mut W,
    ) -> Result<usize, std::io::Error> {
        self.plain.clear();
        self.v2
            .serialize(h, &mut self.plain)
            .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        self.packed.clear();
        self.packed.extend(V2_COMPRESSED_COOKIE.to_be_bytes());
        // The compressed length, known once compressed.
        self.packed.extend([0; 4]);
        self.zlib.reset();
        loop {
            let done = self.zlib.total_in() as usize;
            // compress_vec writes only into spare capacity: a stored block grows by a few bytes per
            // 64 KB, so this much room is always enough for the next step.
            self.packed.reserve(self.plain.len() - done + 64);
            let status = self.zlib.compress_vec(
                &self.plain[done..],
                &mut self.packed,
                flate2::FlushCompress::Finish,
            )?;
            match status {
                flate2::Status::StreamEnd => break,
                flate2::Status::Ok => {}
                // Room was made above, so this would be a loop that never ends.
                flate2::Status::BufError => {
                    return Err(std::io::Error::other("deflate made no progress"));
                }
            }
        }
        let len = u32::try_from(self.packed.len() - 8)
            .map_err(|_| std::io::Error::other("a compressed histogram of more than 4 GB"))?;
        self.packed[4..8].copy_from_slice(&len.to_be_bytes());
        writer.write_all(&self.packed)?;
        Ok(self.packed.len())
    }
}

/// A histogram's bucket layout, computed exactly as hdrhistogram's `new_with_bounds` computes it, so
/// that an encoded count's index means the same value here as there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    unit_magnitude: u8,
    sub_bucket_half_count_magnitude: u8,
    sub_bucket_half_count: u32,
    sub_bucket_mask: u64,
    leading_zero_count_base: u8,
    /// Number of buckets (the counts array's length).
    len: usize,
}

impl Shape {
    fn new(low: u64, high: u64, sigfig: u8) -> Result<Shape, CodecError> {
        let invalid =
            |why: &str| malformed(format!("invalid shape ({low}, {high}, {sigfig}): {why}"));
        if low < 1 {
            return Err(invalid("lowest value is 0"));
        }
        if low > u64::MAX / 2 || high < 2 * low {
            return Err(invalid("highest value is below twice the lowest"));
        }
        if sigfig > 5 {
            return Err(invalid("more than 5 significant digits"));
        }
        // The same float expressions as hdrhistogram, so edge cases round alike.
        let largest = 2 * 10_u32.pow(u32::from(sigfig));
        let unit_magnitude = (low as f64).log2().floor() as u8;
        let sub_bucket_count_magnitude = f64::from(largest).log2().ceil() as u8;
        if unit_magnitude + sub_bucket_count_magnitude > 63 {
            return Err(invalid(
                "the significant digits cannot be represented beyond the lowest",
            ));
        }
        let sub_bucket_count = 1_u32 << sub_bucket_count_magnitude;
        let sub_bucket_half_count = sub_bucket_count / 2;
        // hdrhistogram's buckets_to_cover(high) and num_bins.
        let mut smallest_untrackable = u64::from(sub_bucket_count) << unit_magnitude;
        let mut buckets: u32 = 1;
        while smallest_untrackable <= high {
            if smallest_untrackable > u64::MAX / 2 {
                buckets += 1;
                break;
            }
            smallest_untrackable <<= 1;
            buckets += 1;
        }
        Ok(Shape {
            unit_magnitude,
            sub_bucket_half_count_magnitude: sub_bucket_count_magnitude - 1,
            sub_bucket_half_count,
            sub_bucket_mask: (u64::from(sub_bucket_count) - 1) << unit_magnitude,
            leading_zero_count_base: 64 - unit_magnitude - sub_bucket_count_magnitude,
            len: (buckets as usize + 1) * sub_bucket_half_count as usize,
        })
    }

    /// The lowest value of bucket `index` (hdrhistogram's `value_for`).
    fn value_for(&self, index: usize) -> u64 {
        let mut bucket = (index >> self.sub_bucket_half_count_magnitude) as i64 - 1;
        let mut sub_bucket =
            (index as u32 & (self.sub_bucket_half_count - 1)) + self.sub_bucket_half_count;
        if bucket < 0 {
            sub_bucket -= self.sub_bucket_half_count;
            bucket = 0;
        }
        u64::from(sub_bucket) << (bucket as u32 + u32::from(self.unit_magnitude))
    }

    /// The bucket a value is counted in (hdrhistogram's `index_for`); may be past the last one.
    fn index_for(&self, value: u64) -> Option<usize> {
        let bucket = self.bucket_for(value);
        let sub_bucket = (value >> (u32::from(bucket) + u32::from(self.unit_magnitude))) as i64;
        let base = (i64::from(bucket) + 1) << self.sub_bucket_half_count_magnitude;
        usize::try_from(base + sub_bucket - i64::from(self.sub_bucket_half_count)).ok()
    }

    fn bucket_for(&self, value: u64) -> u8 {
        self.leading_zero_count_base - (value | self.sub_bucket_mask).leading_zeros() as u8
    }

    fn highest_equivalent(&self, value: u64) -> u64 {
        if value == u64::MAX {
            return u64::MAX;
        }
        let shift = u32::from(self.bucket_for(value)) + u32::from(self.unit_magnitude);
        let lowest = (value >> shift) << shift;
        lowest.saturating_add(1 << shift) - 1
    }
}

/// Walks a V2 payload, calling `f(index, count)` for every number in it, in index order (`count` is 0
/// for a zero or a run of zeros, and `index` may then be past the end). The numbers are zig-zag
/// LEB128-64b9B: a count, or (negative) a run of that many zero buckets. Refuses what hdrhistogram's
/// decoder refuses: a truncated number, a non-zero count past the last of `len` buckets, a run it
/// cannot negate (`i64::MIN`) or that overflows the index. Counts and runs alternate at random in a
/// real histogram, so the step between them is chosen without a branch (a mispredicted one per number
/// costs more than the rest of the loop), and the rare faults are gathered and reported at the end.
#[inline]
fn walk(payload: &[u8], len: usize, mut f: impl FnMut(usize, u64)) -> Result<(), CodecError> {
    let mut pos = 0;
    let mut index: usize = 0;
    let mut past_end = false;
    let mut bad_run = false;
    while let Some(&first) = payload.get(pos) {
        // Most numbers are one byte (small counts, short runs): keep that path short.
        let zz = if first < 0x80 {
            pos += 1;
            u64::from(first)
        } else {
            varint(payload, &mut pos).ok_or_else(|| malformed("a count is truncated"))?
        };
        let v = ((zz >> 1) as i64) ^ -((zz & 1) as i64);
        // max(v, 0) by masking: the compiler turns the comparison into a branch.
        let count = (v & !(v >> 63)) as u64;
        past_end |= (v > 0) & (index >= len);
        bad_run |= v == i64::MIN;
        f(index, count);
        let step = if v < 0 { v.unsigned_abs() } else { 1 };
        index = index
            .checked_add(step as usize)
            .ok_or_else(|| malformed("a run of zeros is too long"))?;
    }
    if past_end {
        return Err(malformed(
            "more counts than the histogram's shape has buckets",
        ));
    }
    if bad_run {
        return Err(malformed("a run of zeros is too long"));
    }
    Ok(())
}

/// One LEB128-64b9B number at `pos`: 7 bits a byte for up to 8 bytes, then a whole 9th byte.
fn varint(payload: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for k in 0..9 {
        let b = *payload.get(*pos)?;
        *pos += 1;
        if k == 8 {
            return Some(value | u64::from(b) << 56);
        }
        value |= u64::from(b & 0x7f) << (7 * k);
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    unreachable!("the ninth byte returns")
}

/// A value in microseconds as milliseconds.
pub fn us_to_ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

#[cfg(test)]
mod tests;
