//! A step's latency percentile distribution, as HdrHistogram prints it (`.hgrm`): what the report's
//! percentile chart draws and what HdrHistogram's plotFiles and gnuplot scripts read.
//!
//! [`Distribution::of`] takes exactly the rows of HdrHistogram's (Java) `outputPercentileDistribution`
//! with 5 ticks per half distance and values scaled from microseconds to milliseconds, and
//! [`Distribution::to_hgrm`] prints them byte for byte as Java does, numbers rounded as Java's
//! `Formatter` rounds them (half up on the shortest decimal, not on the binary value as C and Rust
//! do: a mean of 1.0005 ms prints `1.001`). `results/tests/golden/hgrm/` holds Java's own output for
//! the tests; tests/hgrm/check.py compares a run's files with HdrHistogram's readers.
use std::fmt::Write as _;

use hdrhistogram::Histogram;

/// One step's merged latency distribution.
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    /// The step, counted from 1.
    pub step: u32,
    /// Values recorded.
    pub total: u64,
    pub mean_ms: f64,
    pub stddev_ms: f64,
    pub max_ms: f64,
    /// The histogram's shape, as the footer's `#[Buckets = …, SubBuckets = …]` line says it.
    pub buckets: u32,
    pub sub_buckets: u32,
    /// Rising quantiles, as the `.hgrm` rows list them.
    pub points: Vec<Point>,
}

/// One row of a `.hgrm`: the value at `quantile` and the count of values up to it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub value_ms: f64,
    /// In [0, 1].
    pub quantile: f64,
    pub count: u64,
}

/// Why a `.hgrm` text could not be read. Lines are counted from 1.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HgrmError {
    #[error(
        "no `Value Percentile TotalCount 1/(1-Percentile)` header line: not an HdrHistogram percentile distribution"
    )]
    NoHeader,
    #[error("line {line}: {what}")]
    Line { line: usize, what: String },
    #[error("ends before its `#[{0} = …]` line")]
    MissingFooter(&'static str),
}

/// HdrHistogram's default, and what its tools print: each half of the distance left to 100 % is
/// cut into this many equal steps.
const TICKS_PER_HALF_DISTANCE: i64 = 5;
/// stampede's histograms record microseconds; a `.hgrm` says milliseconds.
const US_PER_MS: f64 = 1000.0;
/// Decimals of the value columns: Java prints the histogram's significant digits, 3 in stampede's
/// one shape (`shared::histogram`).
const VALUE_DECIMALS: usize = 3;
/// The column titles, as whitespace-separated words (other printers align them differently).
const HEADER: [&str; 4] = ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"];

impl Distribution {
    /// The rows HdrHistogram's `outputPercentileDistribution(out, 5, 1000.0)` prints for `h` (values in
    /// microseconds, printed in milliseconds), with its footer's numbers computed as Java computes them.
    pub fn of(step: u32, h: &Histogram<u64>) -> Distribution {
        let (mean_us, stddev_us) = moments(h);
        Distribution {
            step,
            total: h.len(),
            mean_ms: mean_us / US_PER_MS,
            stddev_ms: stddev_us / US_PER_MS,
            max_ms: h.max() as f64 / US_PER_MS,
            buckets: u32::from(h.buckets()),
            sub_buckets: sub_buckets(h.sigfig()),
            points: percentile_rows(h),
        }
    }

    /// The `.hgrm` text, byte for byte as HdrHistogram's Java `outputPercentileDistribution` prints it.
    pub fn to_hgrm(&self) -> String {
        let mut s = String::with_capacity(128 + 56 * self.points.len());
        let [value, percentile, count, inverse] = HEADER;
        // Writing into a String cannot fail.
        let _ = write!(
            s,
            "{value:>12} {percentile:>14} {count:>10} {inverse:>14}\n\n"
        );
        for p in &self.points {
            let _ = write!(
                s,
                "{:>12} {:>2} {:>10}",
                java_fixed(p.value_ms, VALUE_DECIMALS),
                java_fixed(p.quantile, 12),
                p.count
            );
            // Java leaves out the last row's 1/(1-q), the only infinite one.
            if p.quantile != 1.0 {
                let _ = write!(s, " {:>14}", java_fixed(1.0 / (1.0 - p.quantile), 2));
            }
            s.push('\n');
        }
        let ms = |v: f64| java_fixed(v, VALUE_DECIMALS);
        let _ = writeln!(
            s,
            "#[Mean    = {:>12}, StdDeviation   = {:>12}]",
            ms(self.mean_ms),
            ms(self.stddev_ms)
        );
        let _ = writeln!(
            s,
            "#[Max     = {:>12}, Total count    = {:>12}]",
            ms(self.max_ms),
            self.total
        );
        let _ = writeln!(
            s,
            "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
            self.buckets, self.sub_buckets
        );
        s
    }

    /// Reads a `.hgrm` back: ours, or one another HdrHistogram printer wrote (Java's; the Python
    /// package's, whose count reads `TotalCount = N.000`; any column alignment). Text before the
    /// header and after the footer (a load tool's summary around it, as wrk2 prints) is left alone;
    /// between them every line must be a row or a footer line, and the rows must rise.
    pub fn parse_hgrm(step: u32, text: &str) -> Result<Distribution, HgrmError> {
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        let mut header = None;
        for (n, line) in lines.by_ref() {
            let words: Vec<&str> = line.split_whitespace().collect();
            if words == HEADER {
                header = Some(n);
                break;
            }
            if line.starts_with("\"Value\",") {
                return Err(HgrmError::Line {
                    line: n,
                    what: "a CSV percentile distribution, which has no footer (mean, max, count): print it without useCsvFormat".into(),
                });
            }
        }
        header.ok_or(HgrmError::NoHeader)?;
        let mut points: Vec<Point> = Vec::new();
        let mut footer = Footer::default();
        for (n, line) in lines {
            let at = |what: String| HgrmError::Line { line: n, what };
            let trimmed = line.trim();
            if trimmed.is_empty() {
                continue;
            }
            if let Some(inner) = trimmed.strip_prefix("#[") {
                footer.read(inner, n)?;
                if footer.is_whole() {
                    break;
                }
                continue;
            }
            if footer.started {
                return Err(at(format!("`{trimmed}` among the footer's `#[…]` lines")));
            }
            let p = row(trimmed).map_err(at)?;
            let falls = |last: &Point| {
                p.value_ms < last.value_ms || p.quantile < last.quantile || p.count < last.count
            };
            if points.last().is_some_and(falls) {
                return Err(at(format!(
                    "`{trimmed}` falls below the row before it: rows rise in value, percentile and count"
                )));
            }
            points.push(p);
        }
        footer.into_distribution(step, points)
    }
}

/// The mean and standard deviation as Java's `getMean`/`getStdDeviation` compute them (each bucket
/// at its median value, summed in this order in doubles), so the footer rounds alike.
fn moments(h: &Histogram<u64>) -> (f64, f64) {
    let total = h.len();
    if total == 0 {
        return (0.0, 0.0);
    }
    let median = |v: &hdrhistogram::iterators::IterationValue<u64>| {
        h.median_equivalent(v.value_iterated_to()) as f64
    };
    let sum: f64 = h
        .iter_recorded()
        .fold(0.0, |sum, v| sum + median(&v) * v.count_at_value() as f64);
    let mean = sum / total as f64;
    let squares = h.iter_recorded().fold(0.0, |acc, v| {
        let deviation = median(&v) - mean;
        acc + (deviation * deviation) * v.count_at_value() as f64
    });
    (mean, (squares / total as f64).sqrt())
}

/// HdrHistogram's `subBucketCount`: the power of two that holds 2 × 10^digits values at unit
/// resolution.
fn sub_buckets(sigfig: u8) -> u32 {
    let single_unit = 2 * 10u64.pow(u32::from(sigfig));
    let magnitude = 64 - (single_unit - 1).leading_zeros();
    1 << magnitude.max(1)
}

/// Java's `PercentileIterator` over `h`'s buckets, then its last step to 100 %. A bucket that spans
/// several ticks is a row per tick, except the last bucket, which is one row before the 100 % one.
fn percentile_rows(h: &Histogram<u64>) -> Vec<Point> {
    let total = h.len();
    let mut rows = Vec::new();
    let mut level = 0.0; // percent
    let mut below = 0;
    let mut last = 0;
    for v in h.iter_recorded() {
        below += v.count_at_value();
        last = v.value_iterated_to();
        while 100.0 * below as f64 / total as f64 >= level {
            rows.push(Point {
                value_ms: last as f64 / US_PER_MS,
                quantile: level / 100.0,
                count: below,
            });
            let next = next_level(level);
            // Java stops the bucket loop at the last bucket; a level that can no longer rise (beyond
            // 2^60 values) would repeat forever, where Java spins.
            if below == total || next <= level {
                break;
            }
            level = next;
        }
    }
    if total > 0 {
        rows.push(Point {
            value_ms: last as f64 / US_PER_MS,
            quantile: 1.0,
            count: total,
        });
    }
    rows
}

/// The next percentile level after `level`, as `PercentileIterator.incrementIterationLevel` steps:
/// a fixed tick within each half of the distance left to 100 %, halved at each half.
fn next_level(level: f64) -> f64 {
    let halvings = ((100.0 / (100.0 - level)).ln() / 2f64.ln()) as i64;
    let ticks = u32::try_from(halvings + 1)
        .ok()
        .and_then(|e| 2i64.checked_pow(e))
        .and_then(|p| p.checked_mul(TICKS_PER_HALF_DISTANCE));
    match ticks {
        Some(ticks) => level + 100.0 / ticks as f64,
        None => level,
    }
}

/// `x` with `decimals` places as Java's `%.Nf` prints it: its shortest round-trip decimal digits
/// (Rust's and Java's agree) rounded half up.
fn java_fixed(x: f64, decimals: usize) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "NaN".into()
        } else if x > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let digits: Vec<u8> = mantissa
        .bytes()
        .filter(u8::is_ascii_digit)
        .map(|b| b - b'0')
        .collect();
    // x × 10^decimals = digits × 10^shift; keep the digits before the point of that.
    let shift = exp + 1 + decimals as i64 - digits.len() as i64;
    let mut kept: Vec<u8> = if shift >= 0 {
        let mut d = digits.clone();
        d.resize(digits.len() + shift as usize, 0);
        d
    } else {
        let cut = digits.len() as i64 + shift;
        if cut < 0 {
            Vec::new()
        } else {
            let cut = cut as usize;
            let mut d = digits[..cut].to_vec();
            if digits[cut] >= 5 {
                round_up(&mut d);
            }
            d
        }
    };
    // At least one digit before the point.
    while kept.len() <= decimals {
        kept.insert(0, 0);
    }
    let point = kept.len() - decimals;
    let mut s = String::with_capacity(kept.len() + 2);
    if x.is_sign_negative() {
        s.push('-');
    }
    for (i, d) in kept.iter().enumerate() {
        if i == point {
            s.push('.');
        }
        s.push(char::from(b'0' + d));
    }
    s
}

/// Adds one to a decimal digit string, growing it on a carry out of the first digit.
fn round_up(digits: &mut Vec<u8>) {
    for d in digits.iter_mut().rev() {
        if *d == 9 {
            *d = 0;
        } else {
            *d += 1;
            return;
        }
    }
    digits.insert(0, 1);
}

/// One row: value, percentile, total count, and 1/(1-percentile) (left out, or `inf`, on the last).
fn row(line: &str) -> Result<Point, String> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let bad = |why: &str| {
        format!(
            "`{line}` is not a percentile row (value, percentile, total count, 1/(1-percentile)): {why}"
        )
    };
    if !(3..=4).contains(&fields.len()) {
        return Err(bad(&format!("{} fields", fields.len())));
    }
    let value_ms: f64 = fields[0]
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| bad("the value is not a number of 0 or more"))?;
    let quantile: f64 = fields[1]
        .parse()
        .ok()
        .filter(|q| (0.0..=1.0).contains(q))
        .ok_or_else(|| bad("the percentile is not a number from 0 to 1"))?;
    let count = count(fields[2]).ok_or_else(|| bad("the total count is not a whole number"))?;
    if let Some(inverse) = fields.get(3) {
        inverse
            .parse::<f64>()
            .map_err(|_| bad("1/(1-percentile) is not a number"))?;
    }
    Ok(Point {
        value_ms,
        quantile,
        count,
    })
}

/// A count: a whole number, or one printed with zero decimals (Python's `hdrhistogram` writes
/// `Total count` as `2.000`).
fn count(text: &str) -> Option<u64> {
    if let Ok(n) = text.parse() {
        return Some(n);
    }
    let (whole, fraction) = text.split_once('.')?;
    if !fraction.bytes().all(|b| b == b'0') {
        return None;
    }
    whole.parse().ok()
}

/// The footer's `#[Key = value, …]` lines as they are read.
#[derive(Default)]
struct Footer {
    started: bool,
    mean: Option<f64>,
    stddev: Option<f64>,
    max: Option<f64>,
    total: Option<(u64, usize)>,
    buckets: Option<u32>,
    sub_buckets: Option<u32>,
}

impl Footer {
    /// Reads one line's `Key = value` pairs (`inner` is what follows `#[`); keys no printer we know
    /// writes are left alone.
    fn read(&mut self, inner: &str, line: usize) -> Result<(), HgrmError> {
        self.started = true;
        let at = |what: String| HgrmError::Line { line, what };
        let inner = inner.trim_end().strip_suffix(']').unwrap_or(inner);
        for pair in inner.split(',') {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| at(format!("`{}` is not `Key = value`", pair.trim())))?;
            let key = key.split_whitespace().collect::<Vec<_>>().join(" ");
            let value = value.trim();
            let number = || {
                value
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| at(format!("{key} `{value}` is not a number of 0 or more")))
            };
            let whole =
                || count(value).ok_or_else(|| at(format!("{key} `{value}` is not a whole number")));
            let small = || {
                whole().and_then(|n| {
                    u32::try_from(n).map_err(|_| at(format!("{key} `{value}` is too large")))
                })
            };
            match key.as_str() {
                "Mean" => self.mean = Some(number()?),
                "StdDeviation" => self.stddev = Some(number()?),
                "Max" => self.max = Some(number()?),
                "Total count" | "TotalCount" => self.total = Some((whole()?, line)),
                "Buckets" => self.buckets = Some(small()?),
                "SubBuckets" => self.sub_buckets = Some(small()?),
                _ => {}
            }
        }
        Ok(())
    }

    fn is_whole(&self) -> bool {
        self.mean.is_some()
            && self.stddev.is_some()
            && self.max.is_some()
            && self.total.is_some()
            && self.buckets.is_some()
            && self.sub_buckets.is_some()
    }

    fn into_distribution(self, step: u32, points: Vec<Point>) -> Result<Distribution, HgrmError> {
        let missing = HgrmError::MissingFooter;
        let (total, total_line) = self.total.ok_or(missing("Total count"))?;
        let counted = points.last().map_or(0, |p| p.count);
        if counted != total {
            return Err(HgrmError::Line {
                line: total_line,
                what: format!("Total count is {total} but the rows count {counted} values"),
            });
        }
        Ok(Distribution {
            step,
            total,
            mean_ms: self.mean.ok_or(missing("Mean"))?,
            stddev_ms: self.stddev.ok_or(missing("StdDeviation"))?,
            max_ms: self.max.ok_or(missing("Max"))?,
            buckets: self.buckets.ok_or(missing("Buckets"))?,
            sub_buckets: self.sub_buckets.ok_or(missing("SubBuckets"))?,
            points,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use proptest::prelude::*;
    use shared::histogram;

    const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/hgrm");
    const CASES: [&str; 4] = ["empty", "single", "tie", "wide"];

    fn golden(name: &str) -> String {
        std::fs::read_to_string(format!("{GOLDEN}/{name}")).unwrap()
    }

    /// A golden case's histogram: the untagged intervals of its hlog, added up (in our shape).
    fn hlog_sum(name: &str) -> Histogram<u64> {
        let text = golden(&format!("{name}.hlog"));
        let mut sum = histogram::new();
        for entry in IntervalLogIterator::new(text.as_bytes()) {
            if let LogEntry::Interval(i) = entry.unwrap()
                && i.tag().is_none()
            {
                let h = histogram::decode(&base64_decode(i.encoded_histogram())).unwrap();
                histogram::add(&mut sum, &h);
            }
        }
        sum
    }

    /// Standard base64 (the hlog's payloads), kept here to add no dependency for one test.
    fn base64_decode(text: &str) -> Vec<u8> {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = Vec::new();
        let (mut acc, mut bits) = (0u32, 0);
        for b in text.bytes().filter(|&b| b != b'=') {
            let v = ALPHABET.iter().position(|&a| a == b).unwrap() as u32;
            acc = (acc << 6) | v;
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        out
    }

    #[test]
    fn our_hgrm_is_javas_byte_for_byte() {
        for name in CASES {
            let want = golden(&format!("{name}.hgrm"));
            let got = Distribution::of(1, &hlog_sum(name)).to_hgrm();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn javas_and_pythons_hgrm_read_back_to_the_histogram() {
        for name in CASES {
            let h = hlog_sum(name);
            let ours = Distribution::of(3, &h);
            let java = Distribution::parse_hgrm(3, &golden(&format!("{name}.hgrm"))).unwrap();
            assert_close(&java, &ours);
            // Python's printer ticks its percentiles differently (its own schedule), but the
            // footer and the ends are the histogram's.
            let py = Distribution::parse_hgrm(3, &golden(&format!("{name}.python.hgrm"))).unwrap();
            assert_eq!((py.total, py.max_ms), (h.len(), ours.max_ms), "{name}");
            assert_eq!(py.points.first(), ours.points.first(), "{name}");
            assert_eq!(py.points.last(), ours.points.last(), "{name}");
        }
    }

    /// Equal as far as the text carries: values and counts exactly, the rest to its printed places.
    fn assert_close(read: &Distribution, want: &Distribution) {
        assert_eq!(
            (read.step, read.total, read.buckets, read.sub_buckets),
            (want.step, want.total, want.buckets, want.sub_buckets)
        );
        for (a, b) in [
            (read.mean_ms, want.mean_ms),
            (read.stddev_ms, want.stddev_ms),
            (read.max_ms, want.max_ms),
        ] {
            assert!((a - b).abs() <= 0.0005 + 1e-12, "{a} vs {b}");
        }
        assert_eq!(read.points.len(), want.points.len());
        for (r, w) in read.points.iter().zip(&want.points) {
            assert_eq!((r.value_ms, r.count), (w.value_ms, w.count));
            // 12 places: half a unit of the last, and the binary error of a tie.
            assert!((r.quantile - w.quantile).abs() <= 6e-13, "{r:?} vs {w:?}");
        }
    }

    #[test]
    fn java_rounds_the_shortest_decimal_half_up() {
        // Java's outputs (jshell: String.format("%.3f", 1.0005) and so on), where C's printf
        // rounds the binary value instead.
        for (x, places, java) in [
            (1.0005, 3, "1.001"),
            (0.125, 2, "0.13"),
            (0.15, 1, "0.2"),
            (2.5, 0, "3"),
            (0.0004, 3, "0.000"),
            (0.0005, 3, "0.001"),
            (999.9996, 3, "1000.000"),
            (0.0, 3, "0.000"),
            (3600809.983, 3, "3600809.983"),
            (1e21, 2, "1000000000000000000000.00"),
            (0.9998779296875, 12, "0.999877929688"),
        ] {
            assert_eq!(java_fixed(x, places), java, "{x} to {places}");
        }
    }

    #[test]
    fn damaged_files_name_the_line() {
        let good = golden("tie.hgrm");
        let cases: [(&str, &str, &str); 6] = [
            (
                "1.001 1.000000000000          2",
                "1.001 abc 2",
                "line 10: `1.001 abc 2`",
            ),
            (
                "1.000 0.500000000000",
                "1.000 0.600000000000",
                "line 9: `1.001 0.550000000000",
            ),
            (
                "Total count    =            2",
                "Total count = 3",
                "line 12: Total count is 3",
            ),
            (
                "#[Mean    =        1.001",
                "#[Mean = -1",
                "line 11: Mean `-1`",
            ),
            (
                "       Value     Percentile",
                "Values",
                "no `Value Percentile",
            ),
            (
                "#[Buckets",
                "#[Bucket",
                "ends before its `#[Buckets = …]` line",
            ),
        ];
        for (from, to, said) in cases {
            assert!(good.contains(from), "{from}");
            let e = Distribution::parse_hgrm(1, &good.replacen(from, to, 1)).unwrap_err();
            assert!(e.to_string().starts_with(said), "{to}: {e}");
        }
        let cut = &good[..good.find("#[Max").unwrap()];
        let e = Distribution::parse_hgrm(1, cut).unwrap_err();
        assert_eq!(e, HgrmError::MissingFooter("Total count"));
    }

    #[test]
    fn text_around_the_distribution_is_left_alone() {
        let wrapped = format!(
            "  Latency Distribution\n{}----\n  2 requests\n",
            golden("tie.hgrm")
        );
        let d = Distribution::parse_hgrm(2, &wrapped).unwrap();
        assert_eq!((d.step, d.total, d.points.len()), (2, 2, 8));
    }

    proptest! {
        // Each case walks a full histogram per row, which debug builds make slow.
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn rows_are_the_histograms(values in proptest::collection::vec((1u64..5_000_000, 1u64..400), 0..60)) {
            let mut h = histogram::new();
            for &(v, n) in &values {
                h.record_n(v, n).unwrap();
            }
            let d = Distribution::of(1, &h);
            prop_assert_eq!(d.total, h.len());
            if let (Some(first), Some(last)) = (d.points.first(), d.points.last()) {
                prop_assert_eq!((first.quantile, last.quantile, last.count), (0.0, 1.0, h.len()));
                prop_assert_eq!(last.value_ms, d.max_ms);
            }
            for w in d.points.windows(2) {
                prop_assert!(w[0].quantile < w[1].quantile && w[0].count <= w[1].count);
            }
            for p in &d.points {
                // Each row is a bucket's top, the count of values up to it, and that count first
                // reaches the row's percentile in that bucket.
                let top = (p.value_ms * US_PER_MS).round() as u64;
                prop_assert_eq!(h.highest_equivalent(top), top);
                prop_assert_eq!(h.count_between(0, top), p.count);
                let share = |n: u64| n as f64 / h.len() as f64;
                prop_assert!(share(p.count) >= p.quantile - 1e-12);
                // Values start at 1 us, so a bucket's lowest value is 1 or more.
                let before = h.count_between(0, h.lowest_equivalent(top) - 1);
                prop_assert!(
                    p.quantile == 0.0 || p.quantile == 1.0 || share(before) < p.quantile + 1e-12,
                    "{:?} was reached in an earlier bucket ({} values below it)", p, before
                );
            }
            let back = Distribution::parse_hgrm(1, &d.to_hgrm()).unwrap();
            assert_close(&back, &d);
            prop_assert_eq!(back.to_hgrm(), Distribution::parse_hgrm(1, &back.to_hgrm()).unwrap().to_hgrm());
        }

        #[test]
        fn a_damaged_file_is_an_error_or_reads_back_never_a_panic(
            at in 0usize..4000, len in 0usize..40, with in "[0-9a-z.#\\[\\]=, \n-]{0,40}", wide in any::<bool>()
        ) {
            let good = golden(if wide { "wide.hgrm" } else { "tie.hgrm" });
            let at = good.floor_char_boundary(at.min(good.len()));
            let to = good.floor_char_boundary((at + len).min(good.len()));
            let text = format!("{}{with}{}", &good[..at], &good[to..]);
            match Distribution::parse_hgrm(1, &text) {
                Ok(d) => {
                    let back = Distribution::parse_hgrm(1, &d.to_hgrm()).unwrap();
                    prop_assert_eq!(back.total, d.total);
                    prop_assert_eq!(back.points.len(), d.points.len());
                }
                Err(HgrmError::Line { line, .. }) => {
                    prop_assert!((1..=text.lines().count()).contains(&line));
                }
                Err(_) => {}
            }
        }
    }
}
