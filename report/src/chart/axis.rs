//! An axis: how values map to pixels (linear, log, or HdrHistogram's percentile axis), where its ticks
//! go and how they read.

/// How an axis spaces its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Decades; values at or below zero sit at the axis' foot.
    Log,
    /// Values are quantiles q in [0, 1), placed at 1/(1-q) on a log axis, as HdrHistogram plots them:
    /// 90 %, 99 %, 99.9 % … are equally spaced.
    Percentile,
}

/// How tick labels and readouts write a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A count or a rate: 950, 1.2k, 40k, 3M.
    Si,
    /// Milliseconds: 0.5 ms, 20 ms, 1.5 s.
    Ms,
    /// Seconds of a run: 30 s, 2 min.
    Seconds,
    /// Percent: 40 %.
    Percent,
    /// A quantile written as a percentile: 99.9 %.
    Quantile,
}

impl Unit {
    /// The name the page's script reads to write a readout the way the ticks are written.
    pub fn code(self) -> &'static str {
        match self {
            Unit::Si => "si",
            Unit::Ms => "ms",
            Unit::Seconds => "s",
            Unit::Percent => "pct",
            Unit::Quantile => "q",
        }
    }

    /// `v` as a tick or readout label.
    pub fn label(self, v: f64) -> String {
        match self {
            Unit::Si => si(v),
            Unit::Ms if v.abs() >= 1000.0 => format!("{} s", short(v / 1000.0)),
            Unit::Ms => format!("{} ms", short(v)),
            Unit::Seconds if v.abs() >= 120.0 => format!("{} min", short(v / 60.0)),
            Unit::Seconds => format!("{} s", short(v)),
            Unit::Percent => format!("{} %", short(v)),
            // Every nine counts: 99.99 % is not 100 %.
            Unit::Quantile => format!("{} %", trimmed(&format!("{:.5}", 100.0 * v))),
        }
    }
}

/// At most three significant digits, no trailing zeros: 0.25, 12.5, 1200.
pub fn short(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".into();
    }
    let digits = (2 - v.abs().log10().floor() as i32).clamp(0, 6) as usize;
    let s = format!("{v:.digits$}");
    let s = trimmed(&s);
    if s == "-0" { "0".into() } else { s }
}

/// A decimal without its trailing zeros (and point).
pub fn trimmed(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

/// SI prefixes: 1.2k, 40k, 3M.
fn si(v: f64) -> String {
    const PREFIXES: [(f64, &str); 3] = [(1e9, "G"), (1e6, "M"), (1e3, "k")];
    for (scale, p) in PREFIXES {
        if v.abs() >= scale {
            return format!("{}{p}", short(v / scale));
        }
    }
    short(v)
}

/// An axis of a chart: its label, unit and scale, and optionally a fixed range.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub label: String,
    pub unit: Unit,
    pub scale: Scale,
    /// A linear axis starts at zero unless told not to (rates and latencies do; a timeline's or a
    /// ramp's x need not).
    pub from_zero: bool,
    /// A fixed range instead of the data's.
    pub range: Option<(f64, f64)>,
    /// Ticks only at whole numbers (a probe's number: no probe 2.5).
    pub whole: bool,
}

impl Axis {
    pub fn new(label: &str, unit: Unit, scale: Scale) -> Axis {
        Axis {
            label: label.to_string(),
            unit,
            scale,
            from_zero: scale == Scale::Linear,
            range: None,
            whole: false,
        }
    }

    pub fn linear(label: &str, unit: Unit) -> Axis {
        Axis::new(label, unit, Scale::Linear)
    }

    pub fn log(label: &str, unit: Unit) -> Axis {
        Axis::new(label, unit, Scale::Log)
    }

    /// HdrHistogram's percentile axis (x = 1/(1-q)), 90 % to 99.999 % at least.
    pub fn percentile(label: &str) -> Axis {
        Axis::new(label, Unit::Quantile, Scale::Percentile)
    }

    /// The same axis on another scale (the latency chart's log/linear switch).
    pub fn with_scale(&self, scale: Scale) -> Axis {
        Axis {
            scale,
            from_zero: scale == Scale::Linear,
            ..self.clone()
        }
    }

    pub fn not_from_zero(mut self) -> Axis {
        self.from_zero = false;
        self
    }

    pub fn whole(mut self) -> Axis {
        self.whole = true;
        self
    }

    pub fn with_range(mut self, lo: f64, hi: f64) -> Axis {
        self.range = Some((lo, hi));
        self
    }
}

/// The largest 1/(1-q) drawn: a quantile of 1 (the maximum) is infinitely far out.
const PERCENTILE_FAR: f64 = 1e6;

/// An axis fitted to its data, mapping values to pixels between `from` and `to`.
#[derive(Debug, Clone)]
pub struct Fitted {
    scale: Scale,
    unit: Unit,
    /// The ends, in transformed units (log10 for log scales).
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
    ticks: Vec<f64>,
}

impl Fitted {
    /// `axis` fitted to `values` (non-finite ones ignored), drawn from pixel `from` to `to`.
    pub fn new(axis: &Axis, values: impl Iterator<Item = f64>, from: f64, to: f64) -> Fitted {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        // A quantile of 1 (the maximum) is drawn at the far end whatever it is, so it does not
        // decide where that end is.
        let counts = |v: f64| match axis.scale {
            Scale::Linear => true,
            Scale::Log => v > 0.0,
            Scale::Percentile => v < 1.0,
        };
        for v in values.filter(|v| v.is_finite()) {
            if counts(v) {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
        if let Some((a, b)) = axis.range {
            (lo, hi) = (a, b);
        }
        let (lo, hi, ticks) = match axis.scale {
            Scale::Linear if axis.range.is_some() && hi > lo => fixed_ticks(lo, hi, axis.whole),
            Scale::Linear => linear_ticks(lo, hi, axis.from_zero, axis.whole),
            Scale::Log if axis.range.is_some() && hi > lo && lo > 0.0 => fixed_log_ticks(lo, hi),
            Scale::Log => log_ticks(lo, hi),
            Scale::Percentile => percentile_ticks(hi),
        };
        Fitted {
            scale: axis.scale,
            unit: axis.unit,
            lo,
            hi,
            from,
            to,
            ticks,
        }
    }

    fn transform(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear => v,
            Scale::Log if v > 0.0 => v.log10(),
            Scale::Log => self.lo,
            Scale::Percentile => (1.0 / (1.0 - v.clamp(0.0, 1.0)))
                .min(PERCENTILE_FAR)
                .log10(),
        }
    }

    /// The pixel of `v`, kept within the axis (a value off its end sits at the end).
    pub fn px(&self, v: f64) -> f64 {
        let t = self.transform(v).clamp(self.lo, self.hi);
        let span = (self.hi - self.lo).max(f64::MIN_POSITIVE);
        self.from + (t - self.lo) / span * (self.to - self.from)
    }

    /// How the page's script turns a pixel back into a value (a line's readout between points):
    /// `SCALE LO HI FROM TO`, the scale `l`inear, lo`g` or `p`ercentile, its ends transformed.
    pub fn mapping(&self) -> String {
        let scale = match self.scale {
            Scale::Linear => 'l',
            Scale::Log => 'g',
            Scale::Percentile => 'p',
        };
        format!("{scale} {} {} {} {}", self.lo, self.hi, self.from, self.to)
    }

    /// The tick values (in data units) and their labels.
    pub fn ticks(&self) -> Vec<(f64, String)> {
        self.ticks
            .iter()
            .map(|&t| (t, self.unit.label(t)))
            .collect()
    }

    /// The axis' two ends, in data units (the far one is where a percentile chart puts the maximum).
    pub fn ends(&self) -> (f64, f64) {
        let back = |t: f64| match self.scale {
            Scale::Linear => t,
            Scale::Log => 10f64.powf(t),
            Scale::Percentile => 1.0 - 10f64.powf(-t),
        };
        (back(self.lo), back(self.hi))
    }
}

/// A step of 1, 2, 2.5 or 5 times a power of ten that cuts `span` into at most `max` parts; `whole`,
/// a whole number and never 2.5 (a step of 25 is, but 2.5 of a count is not).
fn nice_step(span: f64, max: f64, whole: bool) -> f64 {
    let raw = span / max;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .filter(|m| !(whole && *m == 2.5 && magnitude < 10.0))
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude);
    if whole { step.max(1.0) } else { step }
}

fn linear_ticks(lo: f64, hi: f64, from_zero: bool, whole: bool) -> (f64, f64, Vec<f64>) {
    let (mut lo, mut hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    if from_zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        // One value: a range around it, so it does not sit on an edge of nothing.
        (lo, hi) = if lo == 0.0 {
            (0.0, 1.0)
        } else {
            (lo.min(0.0), hi.max(0.0) + hi.abs() * 0.2)
        };
    }
    let step = nice_step(hi - lo, 5.0, whole);
    let lo = (lo / step).floor() * step;
    let hi = (hi / step).ceil() * step;
    let n = ((hi - lo) / step).round() as usize;
    let ticks = (0..=n).map(|i| tidy(lo + i as f64 * step)).collect();
    (lo, hi, ticks)
}

/// A fixed range ends where it was told to, not on a tick: its ticks are the round values within.
fn fixed_ticks(lo: f64, hi: f64, whole: bool) -> (f64, f64, Vec<f64>) {
    let step = nice_step(hi - lo, 5.0, whole);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    let ticks = (first..=last).map(|i| tidy(i as f64 * step)).collect();
    (lo, hi, ticks)
}

/// Rounds away the float noise of adding steps (0.30000000000000004).
fn tidy(v: f64) -> f64 {
    (v * 1e9).round() / 1e9
}

fn log_ticks(lo: f64, hi: f64) -> (f64, f64, Vec<f64>) {
    let (lo, hi) = if lo.is_finite() && lo > 0.0 {
        (lo, hi)
    } else {
        (1.0, 10.0)
    };
    let a = lo.log10().floor();
    let b = hi.log10().ceil().max(a + 1.0);
    let decades = (b - a) as i32;
    // Up to three decades: 2 and 5 as well, so a line between two ticks can be read against a
    // labelled value (a 37 ms beside a 4 s); more would crowd the labels.
    let within: &[f64] = if decades <= 3 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let mut ticks = Vec::new();
    for d in a as i32..=b as i32 {
        for m in within {
            let t = m * 10f64.powi(d);
            if t <= 10f64.powf(b) * 1.0001 {
                ticks.push(tidy_sig(t));
            }
        }
    }
    (a, b, ticks)
}

/// A fixed range on a log scale ends where it was told to, not on a decade (a search's rates
/// within one decade and a bit are not squeezed into two): its ticks are the 1, 2, 5 within.
fn fixed_log_ticks(lo: f64, hi: f64) -> (f64, f64, Vec<f64>) {
    let (a, b) = (lo.log10(), hi.log10());
    let within: &[f64] = if b - a <= 2.0 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let mut ticks = Vec::new();
    for d in a.floor() as i32..=b.ceil() as i32 {
        for m in within {
            let t = tidy_sig(m * 10f64.powi(d));
            if t >= lo * 0.9999 && t <= hi * 1.0001 {
                ticks.push(t);
            }
        }
    }
    (a, b, ticks)
}

/// `t` with the noise of powi rounded off at its own magnitude.
fn tidy_sig(t: f64) -> f64 {
    let m = 10f64.powf(t.log10().floor() - 9.0);
    (t / m).round() * m
}

fn percentile_ticks(hi_q: f64) -> (f64, f64, Vec<f64>) {
    // 90 % … 99.999 % at least; further while the data go further (a distribution of many values).
    let far = if hi_q.is_finite() && hi_q < 1.0 {
        // 1 - 0.99999 is not exactly 1e-5: a hair over five nines is five.
        ((1.0 / (1.0 - hi_q)).log10() - 1e-6)
            .ceil()
            .clamp(5.0, PERCENTILE_FAR.log10())
    } else {
        5.0
    };
    let ticks = (0..=far as i32)
        .map(|d| tidy(1.0 - 10f64.powi(-d)))
        .collect();
    (0.0, far, ticks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(axis: &Axis, values: &[f64]) -> Vec<String> {
        Fitted::new(axis, values.iter().copied(), 0.0, 100.0)
            .ticks()
            .into_iter()
            .map(|(_, l)| l)
            .collect()
    }

    #[test]
    fn linear_ticks_are_round_and_cover_the_data() {
        let a = Axis::linear("rate", Unit::Si);
        assert_eq!(labels(&a, &[100.0, 600.0]), ["0", "200", "400", "600"]);
        assert_eq!(
            labels(&a, &[0.0, 12_400.0]),
            ["0", "2.5k", "5k", "7.5k", "10k", "12.5k"]
        );
        let a = Axis::linear("t", Unit::Seconds).not_from_zero();
        assert_eq!(
            labels(&a, &[0.3, 0.9]),
            ["0.2 s", "0.4 s", "0.6 s", "0.8 s", "1 s"]
        );
    }

    #[test]
    fn a_fixed_range_ends_where_told_with_round_ticks_within() {
        let a = Axis::linear("rate", Unit::Si).with_range(0.0, 650.0);
        assert_eq!(labels(&a, &[100.0, 600.0]), ["0", "200", "400", "600"]);
        let f = Fitted::new(&a, std::iter::empty(), 0.0, 650.0);
        assert_eq!(f.px(650.0), 650.0);
    }

    #[test]
    fn a_whole_axis_ticks_whole_numbers_only() {
        let a = Axis::linear("probe", Unit::Si)
            .whole()
            .with_range(0.5, 12.5);
        assert_eq!(labels(&a, &[]), ["5", "10"], "no 2.5 where 5 fits");
        let a = Axis::linear("probe", Unit::Si).whole().with_range(0.5, 3.5);
        assert_eq!(labels(&a, &[]), ["1", "2", "3"]);
        let a = Axis::linear("probe", Unit::Si).whole();
        assert_eq!(labels(&a, &[1.0, 130.0]), ["0", "50", "100", "150"]);
        let a = Axis::linear("probe", Unit::Si);
        assert_eq!(
            labels(&a, &[0.0, 12.0]),
            ["0", "2.5", "5", "7.5", "10", "12.5"]
        );
    }

    #[test]
    fn a_single_value_gets_a_range_around_it() {
        let a = Axis::linear("rate", Unit::Si).not_from_zero();
        let f = Fitted::new(&a, [5.0].into_iter(), 0.0, 100.0);
        assert!(f.px(5.0) > 0.0 && f.px(5.0) < 100.0);
        let f = Fitted::new(&a, std::iter::empty(), 0.0, 100.0);
        assert_eq!(f.ticks().first().map(|t| t.0), Some(0.0));
    }

    #[test]
    fn log_ticks_are_decades_and_labels_say_the_unit() {
        let a = Axis::log("latency", Unit::Ms);
        assert_eq!(
            labels(&a, &[1.3, 4800.0, 0.0]),
            ["1 ms", "10 ms", "100 ms", "1 s", "10 s"]
        );
        assert_eq!(
            labels(&a, &[1.3, 480.0]),
            [
                "1 ms", "2 ms", "5 ms", "10 ms", "20 ms", "50 ms", "100 ms", "200 ms", "500 ms",
                "1 s"
            ],
            "three decades: 1, 2 and 5 of each"
        );
        assert_eq!(
            labels(&a, &[2.0, 40.0]),
            ["1 ms", "2 ms", "5 ms", "10 ms", "20 ms", "50 ms", "100 ms"]
        );
        let f = Fitted::new(&a, [1.0, 1000.0].into_iter(), 0.0, 90.0);
        assert!((f.px(10.0) - 30.0).abs() < 1e-9 && (f.px(100.0) - 60.0).abs() < 1e-9);
        assert_eq!(f.px(0.0), 0.0, "zero sits at the foot of a log axis");
    }

    #[test]
    fn a_fixed_log_range_ends_where_told_with_round_ticks_within() {
        let a = Axis::log("rate", Unit::Si).with_range(80.0, 2080.0);
        assert_eq!(labels(&a, &[]), ["100", "200", "500", "1k", "2k"]);
        let f = Fitted::new(&a, std::iter::empty(), 0.0, 100.0);
        assert!(f.px(80.0).abs() < 1e-9 && (f.px(2080.0) - 100.0).abs() < 1e-9);
        let a = Axis::log("rate", Unit::Si).with_range(50.0, 2e5);
        assert_eq!(labels(&a, &[]), ["100", "1k", "10k", "100k"]);
    }

    #[test]
    fn percentile_axis_spaces_nines_equally() {
        let a = Axis::percentile("percentile");
        assert_eq!(
            labels(&a, &[0.0, 0.5, 0.999]),
            ["0 %", "90 %", "99 %", "99.9 %", "99.99 %", "99.999 %"]
        );
        let f = Fitted::new(&a, [0.0, 0.9999999].into_iter(), 0.0, 100.0);
        assert_eq!(f.ticks().len(), 7, "a longer tail gets more nines");
        let f = Fitted::new(&a, [0.0].into_iter(), 0.0, 50.0);
        assert!((f.px(0.9) - 10.0).abs() < 1e-9 && (f.px(0.99) - 20.0).abs() < 1e-9);
        assert_eq!(f.px(1.0), 50.0, "the maximum sits at the far end");
    }

    #[test]
    fn the_mapping_takes_a_pixel_back_to_its_value() {
        let back = |f: &Fitted, px: f64| {
            let m: Vec<String> = f.mapping().split(' ').map(str::to_string).collect();
            let n = |i: usize| m[i].parse::<f64>().unwrap();
            let t = n(1) + (px - n(3)) / (n(4) - n(3)) * (n(2) - n(1));
            match m[0].as_str() {
                "g" => 10f64.powf(t),
                "p" => 1.0 - 10f64.powf(-t),
                _ => t,
            }
        };
        let log = Fitted::new(
            &Axis::log("l", Unit::Ms),
            [2.0, 300.0].into_iter(),
            200.0,
            10.0,
        );
        let pct = Fitted::new(&Axis::percentile("q"), [0.5].into_iter(), 0.0, 500.0);
        let lin = Fitted::new(
            &Axis::linear("r", Unit::Si),
            [7.0, 90.0].into_iter(),
            10.0,
            300.0,
        );
        for (f, v) in [(&log, 42.0), (&pct, 0.999), (&lin, 63.0)] {
            assert!((back(f, f.px(v)) - v).abs() < 1e-9 * v.max(1.0), "{v}");
        }
    }

    #[test]
    fn short_numbers_keep_three_digits() {
        assert_eq!(short(0.25), "0.25");
        assert_eq!(short(12.3456), "12.3");
        assert_eq!(short(1234.6), "1235");
        assert_eq!(short(-0.0001), "-0.0001");
        assert_eq!(Unit::Ms.label(1500.0), "1.5 s");
        assert_eq!(Unit::Si.label(2_500_000.0), "2.5M");
        assert_eq!(Unit::Quantile.label(0.999), "99.9 %");
    }
}
