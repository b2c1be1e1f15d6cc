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
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_resolution_is_hdrhistogram_s_own_bucket_width() {
        let h = new();
        let mut v = 1;
        while v < HIGHEST_US {
            for at in [v, v + v / 3, 2 * v - 1] {
                assert_eq!(resolution_us(at), h.equivalent_range(at), "{at} us");
            }
            v *= 2;
        }
        assert_eq!(resolution_us(0), 1);
        assert_eq!(resolution_us(100), 1);
        assert_eq!(resolution_us(5_000), 4);
    }

    #[test]
    fn roundtrip_keeps_counts_and_percentiles() {
        let mut h = new();
        for v in [1u64, 10, 100, 1_000, 20_000, 500_000] {
            h.record(v).unwrap();
        }
        let back = decode(&encode(&h)).unwrap();
        assert_eq!(back.len(), h.len());
        assert_eq!(back.value_at_quantile(0.99), h.value_at_quantile(0.99));
        assert_eq!(back.max(), h.max());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode(b"not a histogram at all").is_err());
        assert!(decode(&[0x1c, 0x84, 0x93, 0x13, 0, 0, 0, 0xff]).is_err());
    }

    /// `prior` plus the encoded histogram, the reference way (decode, then add).
    fn via_decode(prior: &Histogram<u64>, bytes: &[u8]) -> Histogram<u64> {
        let mut h = prior.clone();
        add(&mut h, &decode(bytes).unwrap());
        h
    }

    /// The same, both ways the merge adds encoded bytes (straight into a histogram, and through a
    /// `Sum`); they must agree with each other before they are compared with the reference.
    fn via_encoded(prior: &Histogram<u64>, bytes: &[u8]) -> Histogram<u64> {
        let e = Encoded::parse(bytes.to_vec()).unwrap();
        let mut h = prior.clone();
        e.add_to(&mut h);
        let mut sum = Sum::new();
        sum.add(&e);
        let mut via_sum = prior.clone();
        sum.add_into(&mut via_sum);
        assert_same(&h, &via_sum);
        h
    }

    /// Equal as hdrhistogram compares them (shape, total, min, max, every count), and as encoded.
    fn assert_same(a: &Histogram<u64>, b: &Histogram<u64>) {
        assert_eq!(a, b);
        assert_eq!((a.len(), a.min(), a.max()), (b.len(), b.min(), b.max()));
        assert_eq!(encode(a), encode(b));
    }

    /// A plain V2 encoding written by hand: header, then zig-zag LEB128-64b9B numbers as given
    /// (counts, or negative runs of zeros), so non-canonical encodings can be tried.
    fn v2(low: u64, high: u64, sigfig: u32, numbers: &[i64]) -> Vec<u8> {
        let mut payload = Vec::new();
        for &n in numbers {
            let mut zz = ((n << 1) ^ (n >> 63)) as u64;
            for k in 0..9 {
                if k == 8 {
                    payload.push(zz as u8);
                    break;
                }
                let b = (zz & 0x7f) as u8;
                zz >>= 7;
                if zz == 0 {
                    payload.push(b);
                    break;
                }
                payload.push(b | 0x80);
            }
        }
        let mut out = Vec::new();
        out.extend(V2_COOKIE.to_be_bytes());
        out.extend((payload.len() as u32).to_be_bytes());
        out.extend(0u32.to_be_bytes());
        out.extend(sigfig.to_be_bytes());
        out.extend(low.to_be_bytes());
        out.extend(high.to_be_bytes());
        out.extend(1.0f64.to_bits().to_be_bytes());
        out.extend(payload);
        out
    }

    #[test]
    fn every_canonical_bucket_maps_to_its_own_index() {
        // Exhaustive over the one shape: recording each bucket's value fills every bucket exactly
        // once, in order, and hdrhistogram reports the same highest value for it as `Shape` does.
        let shape = Shape::new(LOWEST_US, HIGHEST_US, SIGFIG).unwrap();
        let mut h = new();
        assert_eq!(shape.len, h.distinct_values());
        for i in 0..shape.len {
            h.record(shape.value_for(i)).unwrap();
        }
        assert_eq!(h.len(), shape.len as u64);
        let mut seen = 0;
        for (i, v) in h.iter_recorded().enumerate() {
            assert_eq!(v.count_at_value(), 1, "bucket {i}");
            assert_eq!(
                v.value_iterated_to(),
                shape.highest_equivalent(shape.value_for(i))
            );
            assert_eq!(shape.index_for(shape.value_for(i)), Some(i));
            assert_eq!(shape.index_for(v.value_iterated_to()), Some(i));
            seen += 1;
        }
        assert_eq!(seen, shape.len);
    }

    #[test]
    fn encoded_adds_what_it_recorded() {
        let mut h = new();
        for v in [0u64, 1, 10, 2_047, 2_048, 100_000, HIGHEST_US] {
            h.record_n(v, 3).unwrap();
        }
        let mut prior = new();
        prior.record(5_000).unwrap();
        for p in [new(), prior] {
            assert_same(&via_decode(&p, &encode(&h)), &via_encoded(&p, &encode(&h)));
        }
        assert_same(&via_decode(&new(), b""), &via_encoded(&new(), b""));
    }

    #[test]
    fn a_sum_of_many_equals_adding_each_decoded() {
        let mut reference = new();
        let mut sum = Sum::new();
        let mut foreign = Histogram::<u64>::new_with_bounds(1_000, HIGHEST_US * 2, 1).unwrap();
        foreign.record_n(HIGHEST_US * 2, 2).unwrap(); // clamped into the canonical range
        foreign.record_n(5_555, 3).unwrap();
        for k in 0..5u64 {
            let mut h = new();
            for v in [k, 100 + k, 30_000 * (k + 1), u64::MAX / 2] {
                h.saturating_record_n(v, k + 1);
            }
            let bytes = if k == 2 { encode(&foreign) } else { encode(&h) };
            add(&mut reference, &decode(&bytes).unwrap());
            sum.add(&Encoded::parse(bytes).unwrap());
        }
        assert_same(&sum.to_histogram(), &reference);
        sum.clear();
        assert_same(&sum.to_histogram(), &new());
    }

    #[test]
    fn non_minimal_encodings_add_like_decode() {
        // Explicit zeros, split runs, runs past the end and trailing bytes are all valid V2.
        let len = Shape::new(1, HIGHEST_US, 3).unwrap().len as i64;
        for numbers in [
            vec![0, 0, 5, -1, -1, 7, 0],
            vec![-3, 2, -100, 1, -(len * 4)],
            vec![1; 40],
            vec![-(len - 1), 9],
            vec![],
        ] {
            let mut bytes = v2(1, HIGHEST_US, 3, &numbers);
            assert_same(&via_decode(&new(), &bytes), &via_encoded(&new(), &bytes));
            bytes.extend([0xff, 0xff]);
            assert_same(&via_decode(&new(), &bytes), &via_encoded(&new(), &bytes));
        }
    }

    #[test]
    fn compressed_encoding_adds_like_decode() {
        use hdrhistogram::serialization::V2DeflateSerializer;
        let mut h = Histogram::<u64>::new_with_bounds(10, 1_000_000, 2).unwrap();
        for v in [10u64, 999, 50_000, 1_000_000] {
            h.record_n(v, 4).unwrap();
        }
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&h, &mut bytes)
            .unwrap();
        assert_same(&via_decode(&new(), &bytes), &via_encoded(&new(), &bytes));
        // What a holder keeps is plain V2 that parses again to the same counts.
        let kept = Encoded::parse(bytes.clone()).unwrap().as_bytes().to_vec();
        assert_eq!(be_u32(&kept, 0).unwrap(), V2_COOKIE);
        assert_same(&via_decode(&new(), &bytes), &via_encoded(&new(), &kept));
    }

    #[test]
    fn merger_takes_owned_or_borrowed_alike() {
        let enc = |v: u64| {
            let mut h = new();
            h.record_n(v, 3).unwrap();
            Encoded::parse(encode(&h)).unwrap()
        };
        let all = [enc(100), enc(20_000), enc(7)];
        let mut m = Merger::default();
        let borrowed = m.merge(&all).clone();
        let owned = m.merge(all.iter().cloned()).clone();
        assert_same(&borrowed, &owned);
        assert_eq!(borrowed.len(), 9);
    }

    #[test]
    fn malformed_encodings_are_errors_like_decode() {
        let len = Shape::new(1, HIGHEST_US, 3).unwrap().len as i64;
        let good = v2(1, HIGHEST_US, 3, &[3, -10, 4]);
        let mut truncated_counts = good.clone();
        truncated_counts.pop();
        let mut unterminated = v2(1, HIGHEST_US, 3, &[]);
        unterminated.extend([0x80, 0x80]);
        unterminated[4..8].copy_from_slice(&2u32.to_be_bytes());
        let mut claims_more = good.clone();
        claims_more[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        let mut bad_ratio = good.clone();
        bad_ratio[32..40].copy_from_slice(&2.0f64.to_bits().to_be_bytes());
        let mut offset = good.clone();
        offset[8..12].copy_from_slice(&1u32.to_be_bytes());
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("garbage", b"not a histogram at all".to_vec()),
            ("short cookie", vec![0x1c, 0x84]),
            ("short header", good[..30].to_vec()),
            ("truncated counts", truncated_counts),
            ("unterminated number", unterminated),
            ("length beyond the bytes", claims_more),
            ("ratio", bad_ratio),
            ("normalizing offset", offset),
            (
                "count past the last bucket",
                v2(1, HIGHEST_US, 3, &[-len, 1]),
            ),
            ("zero run of i64::MIN", v2(1, HIGHEST_US, 3, &[i64::MIN, 1])),
            ("lowest is zero", v2(0, HIGHEST_US, 3, &[1])),
            ("high below twice low", v2(100, 150, 3, &[1])),
            ("six digits", v2(1, HIGHEST_US, 6, &[1])),
            ("beyond stampede's range", v2(1, HIGHEST_US * 3, 3, &[1])),
        ];
        for (what, bytes) in cases {
            assert!(
                Encoded::parse(bytes.clone()).is_err(),
                "{what} was accepted"
            );
            // The reference refuses it too; but it would panic on i64::MIN in a debug build, and it
            // allocates the claimed length (4 GiB here) before finding the bytes short.
            if what != "zero run of i64::MIN" && what != "length beyond the bytes" {
                assert!(decode(&bytes).is_err(), "decode accepted {what}");
            }
        }
        assert!(matches!(
            Encoded::parse(v2(1, HIGHEST_US * 3, 3, &[1])),
            Err(CodecError::Range { .. })
        ));
    }

    #[test]
    fn one_reused_deflater_writes_what_the_library_does() {
        // Empty, one value, dense, and a histogram large enough to need more than one deflate block,
        // in one sequence through the same Deflater: a reset compressor starts from nothing.
        let mut hs = vec![new()];
        let mut one = new();
        one.record(20_000).unwrap();
        hs.push(one);
        let mut dense = new();
        let mut rng = crate::rng::Rng::new(7);
        for _ in 0..50_000 {
            dense.saturating_record(1 + rng.below(3_000_000) as u64);
        }
        hs.push(dense);
        let mut wide = new();
        for v in (1..HIGHEST_US).step_by(997) {
            wide.saturating_record(v);
        }
        hs.push(wide);
        let mut ours = Deflater::default();
        for (i, h) in hs.iter().chain(hs.iter().rev()).enumerate() {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let n = ours.serialize(h, &mut a).unwrap();
            hdrhistogram::serialization::V2DeflateSerializer::new()
                .serialize(h, &mut b)
                .unwrap();
            assert_eq!(n, a.len());
            assert!(
                a == b,
                "histogram {i}: {} bytes against {}",
                a.len(),
                b.len()
            );
            let back = Encoded::parse(a).unwrap();
            let mut h2 = new();
            back.add_to(&mut h2);
            assert_same(h, &h2);
        }
    }

    proptest! {
        // The lossless-merge property: adding per-agent histograms equals recording every sample in one.
        #[test]
        fn merged_equals_one_histogram_fed_all_samples(
            parts in proptest::collection::vec(proptest::collection::vec(1u64..5_000_000, 0..200), 1..6)
        ) {
            let mut all = new();
            let mut merged = new();
            for part in &parts {
                let mut h = new();
                for v in part {
                    h.record(*v).unwrap();
                    all.record(*v).unwrap();
                }
                let shipped = decode(&encode(&h)).unwrap();
                add(&mut merged, &shipped);
            }
            prop_assert_eq!(merged.len(), all.len());
            for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
                prop_assert_eq!(merged.value_at_quantile(q), all.value_at_quantile(q));
            }
            prop_assert_eq!(merged.max(), all.max());
            prop_assert_eq!(merged.min(), all.min());
        }

        // The merge path's property: adding the encoded bytes straight into an accumulator equals
        // decoding them and adding the histogram, for any shape an agent might send (the canonical
        // one, and others that `decode` re-homes), onto an empty or a non-empty accumulator.
        #[test]
        fn encoded_add_equals_decode_then_add(
            canonical in proptest::bool::weighted(0.3),
            low in prop_oneof![Just(1u64), 1u64..64, 1u64..2_000_000],
            high_pick in 0u64..=HIGHEST_US * 2,
            sigfig in 0u8..=5,
            values in proptest::collection::vec((any::<u64>(), 1u64..5_000), 0..300),
            prior in proptest::collection::vec(1u64..10_000_000, 0..20),
        ) {
            let (low, high, sigfig) = if canonical {
                (LOWEST_US, HIGHEST_US, SIGFIG)
            } else {
                (low, high_pick.max(2 * low), sigfig)
            };
            let mut h = Histogram::<u64>::new_with_bounds(low, high, sigfig).unwrap();
            for (v, n) in &values {
                h.saturating_record_n(v % (high + 1), *n);
            }
            let mut acc = new();
            for v in &prior {
                acc.record(*v).unwrap();
            }
            let bytes = encode(&h);
            let a = via_decode(&acc, &bytes);
            let b = via_encoded(&acc, &bytes);
            prop_assert_eq!(&a, &b);
            prop_assert_eq!((a.len(), a.min(), a.max()), (b.len(), b.min(), b.max()));
            prop_assert_eq!(encode(&a), encode(&b));
        }

        #[test]
        fn random_bytes_are_refused_or_added_like_decode(
            bytes in proptest::collection::vec(any::<u8>(), 0..120),
            numbers in proptest::collection::vec(-30_000i64..30_000, 0..40),
        ) {
            // Arbitrary bytes, and arbitrary numbers behind a valid header.
            for b in [bytes, v2(1, HIGHEST_US, 3, &numbers)] {
                match (decode(&b), Encoded::parse(b.clone())) {
                    (Ok(h), Ok(e)) => {
                        let mut acc = new();
                        e.add_to(&mut acc);
                        prop_assert_eq!(&acc, &h);
                    }
                    (Err(_), Err(_)) => {}
                    (d, e) => prop_assert!(false, "decode {:?} but parse {:?}", d.is_ok(), e.is_ok()),
                }
            }
        }

        #[test]
        fn merge_is_associative(a in proptest::collection::vec(1u64..1_000_000, 0..60),
                                b in proptest::collection::vec(1u64..1_000_000, 0..60),
                                c in proptest::collection::vec(1u64..1_000_000, 0..60)) {
            let h = |v: &[u64]| { let mut h = new(); for x in v { h.record(*x).unwrap(); } h };
            let (ha, hb, hc) = (h(&a), h(&b), h(&c));
            let mut left = ha.clone();
            add(&mut left, &hb);
            add(&mut left, &hc);
            let mut bc = hb.clone();
            add(&mut bc, &hc);
            let mut right = ha.clone();
            add(&mut right, &bc);
            prop_assert_eq!(encode(&left), encode(&right));
        }

        #[test]
        fn merge_is_commutative(a in proptest::collection::vec(1u64..1_000_000, 0..100),
                                b in proptest::collection::vec(1u64..1_000_000, 0..100)) {
            let mut ha = new();
            let mut hb = new();
            for v in &a { ha.record(*v).unwrap(); }
            for v in &b { hb.record(*v).unwrap(); }
            let mut ab = ha.clone();
            add(&mut ab, &hb);
            let mut ba = hb.clone();
            add(&mut ba, &ha);
            prop_assert_eq!(encode(&ab), encode(&ba));
        }
    }
}
