//! Threshold expressions over a step's numbers: the one grammar of `--stop-on`, `--fail-on` and
//! find-max's `--slo`, its typed AST, a parser whose errors point at the bad part, and an evaluator
//! over [`Observed`], the few numbers an expression can name (the step's, or one named request's).
//!
//! ```text
//! condition := metric [ '[' name ']' ] op number unit      spaces allowed between the parts
//! metric    := p50 | p90 | p99 | p999 (p99.9) | max | mean (avg) | failed | errors | ok_rate | requests
//! name      := a request's name in the plan (letters, digits, _ . -); any metric but errors takes one
//! op        := <  |  <=  |  >  |  >=
//! unit      := ms | s | us           latency metrics
//!            | %                     failed, errors (a share) and ok_rate (a share of the demanded rate)
//!            | /s | req/s            ok_rate as replies per second
//!            | (none)                requests, a count of requests written in the step
//! ```
//!
//! An expression is a predicate: `--stop-on`/`--fail-on` act when it holds, an SLO passes when it
//! holds. A censored percentile is only a lower bound of the true one (requests given up at their age),
//! so it can prove `p99>500ms` true but never `p99<50ms`: evaluation is three-valued ([`Truth`]). A
//! named condition (`p99[login]<200ms`) reads that request's own row of the step; a step in which
//! no request of that name was due tells nothing of it ([`Truth::Unknown`]: no breach, no pass).
use std::fmt;
use std::str::FromStr;

use crate::quantity::{self, Quantity};
use crate::step::StepResult;
use crate::step::per_request::RequestRow;

/// A latency statistic of the step's merged histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Latency {
    P50,
    P90,
    P99,
    P999,
    Max,
    Mean,
}

impl Latency {
    pub const ALL: [Latency; 6] = [
        Latency::P50,
        Latency::P90,
        Latency::P99,
        Latency::P999,
        Latency::Max,
        Latency::Mean,
    ];

    /// Its quantity in the catalogue.
    pub fn quantity(self) -> &'static Quantity {
        match self {
            Latency::P50 => &quantity::P50_MS,
            Latency::P90 => &quantity::P90_MS,
            Latency::P99 => &quantity::P99_MS,
            Latency::P999 => &quantity::P999_MS,
            Latency::Max => &quantity::MAX_MS,
            Latency::Mean => &quantity::RESP_TIME,
        }
    }

    /// Its name in the grammar and in [`crate::step::LowerBounds`].
    pub fn name(self) -> &'static str {
        self.quantity().grammar_name()
    }

    /// Its place in [`Observed::latency_ms`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// What an expression measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Latency(Latency),
    /// Requests that failed (transport errors, unexpected statuses, due but never sent), % of due.
    Failed,
    /// The target's transport errors, % of the requests due (autobench's `errors_<host>`).
    Errors,
    /// Replies per second with an expected status: absolute, or % of the demanded rate.
    OkRate,
    /// Requests written in the step: a count.
    Requests,
}

impl Metric {
    /// Its quantity in the catalogue.
    pub fn quantity(self) -> &'static Quantity {
        match self {
            Metric::Latency(l) => l.quantity(),
            Metric::Failed => &quantity::FAILED_PCT,
            Metric::Errors => &quantity::ERRORS,
            Metric::OkRate => &quantity::OK_RATE,
            Metric::Requests => &quantity::REQUESTS,
        }
    }

    /// Whether it may name a request (`p99[login]`): every metric but the transport errors' share,
    /// which a request's row keeps by class only (`failed[name]` counts them with the statuses).
    pub fn takes_a_name(self) -> bool {
        self != Metric::Errors
    }

    /// Its canonical name in the grammar.
    pub fn name(self) -> &'static str {
        self.quantity().grammar_name()
    }

    /// Every metric, in the order the grammar's help lists them.
    const ALL: [Metric; 10] = [
        Metric::Latency(Latency::P50),
        Metric::Latency(Latency::P90),
        Metric::Latency(Latency::P99),
        Metric::Latency(Latency::P999),
        Metric::Latency(Latency::Max),
        Metric::Latency(Latency::Mean),
        Metric::Failed,
        Metric::Errors,
        Metric::OkRate,
        Metric::Requests,
    ];

    fn parse(word: &str) -> Option<Metric> {
        let q = quantity::by_grammar_name(word)?;
        Metric::ALL.into_iter().find(|m| m.quantity() == q)
    }

    fn units(self) -> &'static [Unit] {
        match self {
            Metric::Latency(_) => &[Unit::Ms, Unit::S, Unit::Us],
            Metric::Failed | Metric::Errors => &[Unit::Percent],
            Metric::OkRate => &[Unit::Percent, Unit::PerSecond],
            Metric::Requests => &[Unit::Count],
        }
    }

    /// "ms, s or us", for messages.
    fn units_text(self) -> &'static str {
        match self {
            Metric::Latency(_) => "ms, s or us",
            Metric::Failed | Metric::Errors => "% (a share of requests)",
            Metric::OkRate => "% (of the demanded rate) or /s",
            Metric::Requests => "a bare count (no unit)",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    pub fn symbol(self) -> &'static str {
        match self {
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
        }
    }

    fn holds(self, value: f64, threshold: f64) -> bool {
        match self {
            Cmp::Lt => value < threshold,
            Cmp::Le => value <= threshold,
            Cmp::Gt => value > threshold,
            Cmp::Ge => value >= threshold,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Ms,
    S,
    Us,
    Percent,
    PerSecond,
    /// A bare count (`requests`), written without a unit.
    Count,
}

impl Unit {
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::Ms => "ms",
            Unit::S => "s",
            Unit::Us => "us",
            Unit::Percent => "%",
            Unit::PerSecond => "/s",
            Unit::Count => "",
        }
    }

    fn parse(word: &str) -> Option<Unit> {
        match word {
            "ms" => Some(Unit::Ms),
            "s" => Some(Unit::S),
            "us" | "µs" => Some(Unit::Us),
            "%" => Some(Unit::Percent),
            "/s" | "req/s" => Some(Unit::PerSecond),
            _ => None,
        }
    }
}

/// A number with its unit, as written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    pub value: f64,
    pub unit: Unit,
}

impl Threshold {
    /// In the unit [`Observed`] keeps: ms for latency, percent, or per second.
    pub fn canonical(self) -> f64 {
        match self.unit {
            Unit::S => self.value * 1000.0,
            Unit::Us => self.value / 1000.0,
            Unit::Ms | Unit::Percent | Unit::PerSecond | Unit::Count => self.value,
        }
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.value, self.unit.symbol())
    }
}

/// One comparison, e.g. `p99>500ms`, or of one named request, `p99[login]<200ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub metric: Metric,
    /// The request of the mix it is about; none: the whole step.
    pub request: Option<String>,
    pub cmp: Cmp,
    pub threshold: Threshold,
}

/// Displays in the canonical spelling, which parses back to the same condition.
impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}{}",
            self.subject(),
            self.cmp.symbol(),
            self.threshold
        )
    }
}

/// What an expression can be evaluated against: one step's numbers, and each named request's.
/// Built from a [`StepResult`] by [`Observed::of`], so the grammar does not depend on how a result
/// is laid out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    /// p50, p90, p99, p999, max and mean in ms, in [`Latency::ALL`] order; `None` when the step
    /// measured no latency at all (nothing served, nothing given up), which no threshold can judge.
    pub latency_ms: Option<[f64; 6]>,
    /// Per entry of `latency_ms`: only a lower bound of the true value (a censored percentile).
    pub latency_lower_bound: [bool; 6],
    pub failed_pct: f64,
    pub errors_pct: f64,
    /// Replies per second with an expected status.
    pub ok_rate: f64,
    /// Requests per second demanded; none for the closed model. A named request's: the step's
    /// share of its weight.
    pub demanded_rate: Option<f64>,
    /// Requests written.
    pub requests: u64,
    /// Requests whose latency was measured (served, or given up at their age), and requests due:
    /// what a latency and a share are judged on.
    pub samples: u64,
    pub due: u64,
    /// Each named request's own numbers (its `names` empty), in the plan's order; empty when the
    /// requests are unnamed.
    pub names: Vec<(String, Observed)>,
}

impl Observed {
    /// A step's numbers: its failed share of the requests due, its served (expected-status) rate,
    /// and which latency statistics are lower bounds (requests given up at their age).
    pub fn of(r: &StepResult) -> Observed {
        let l = &r.latency_ms;
        let bound = |l: Latency| {
            l.quantity()
                .bound
                .is_some_and(|b| r.latency_ms.lower_bounds.contains(b))
        };
        let weights: u64 = r.per_request.iter().map(|n| u64::from(n.weight)).sum();
        Observed {
            latency_ms: (r.ok > 0 || r.given_up > 0)
                .then_some([l.p50, l.p90, l.p99, l.p999, l.max, l.mean]),
            latency_lower_bound: Latency::ALL.map(bound),
            failed_pct: r.failed_pct,
            errors_pct: r.errors_pct,
            ok_rate: r.ok_rate,
            demanded_rate: r.demanded_rate,
            requests: r.requests,
            samples: r.ok + r.given_up,
            due: r.due,
            names: r
                .per_request
                .iter()
                .map(|n| {
                    (
                        n.name.clone(),
                        Observed::of_request(n, r.demanded_rate, weights),
                    )
                })
                .collect(),
        }
    }

    /// One named request's numbers: its row of the step, its share of the demanded rate by its
    /// weight among `weights` (their sum). Its given-up requests' ages are not kept apart from its
    /// latencies, so any of them makes every latency statistic of it a lower bound.
    fn of_request(n: &RequestRow, demanded: Option<f64>, weights: u64) -> Observed {
        let l = &n.latency_ms;
        Observed {
            latency_ms: (n.ok > 0 || n.given_up > 0)
                .then_some([l.p50, l.p90, l.p99, l.p999, l.max, l.mean]),
            latency_lower_bound: [n.given_up > 0; 6],
            failed_pct: n.failed_pct,
            errors_pct: 0.0,
            ok_rate: n.ok_rate,
            demanded_rate: demanded
                .filter(|_| weights > 0)
                .map(|d| d * f64::from(n.weight) / weights as f64),
            requests: n.requests,
            samples: n.ok + n.given_up,
            due: n.requests + n.unsent,
            names: Vec::new(),
        }
    }
}

/// Whether a condition holds, when a lower bound cannot tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truth {
    True,
    False,
    /// A censored value on the undecidable side of the threshold, or ok_rate % without a demanded rate.
    Unknown,
}

/// The number a condition looked at, in its canonical unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub value: f64,
    pub lower_bound: bool,
}

impl Condition {
    /// What it compares, as written: `p99`, `p99[login]`.
    pub fn subject(&self) -> String {
        match &self.request {
            Some(name) => format!("{}[{name}]", self.metric.name()),
            None => self.metric.name().to_string(),
        }
    }

    /// Whether the condition holds when things are good: a latency or a failure share below its
    /// threshold, a served rate (or a count of requests) above it. An SLO must; a `--stop-on` names
    /// the breach instead.
    pub fn holds_when_good(&self) -> bool {
        let below = matches!(self.cmp, Cmp::Lt | Cmp::Le);
        match self.metric {
            Metric::OkRate | Metric::Requests => !below,
            _ => below,
        }
    }

    /// The numbers it is about: the step's, or its request's; none when that request had nothing
    /// due in the step (or the step has no such name), which tells nothing of it.
    pub fn scope<'a>(&self, o: &'a Observed) -> Option<&'a Observed> {
        match &self.request {
            None => Some(o),
            Some(name) => o
                .names
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, s)| s)
                .filter(|s| s.due > 0),
        }
    }

    /// Whether this condition compares with the demanded rate, which the closed model lacks.
    pub fn needs_demanded_rate(&self) -> bool {
        self.metric == Metric::OkRate && self.threshold.unit == Unit::Percent
    }

    /// The observed number this condition compares; none when it cannot be known.
    pub fn read(&self, o: &Observed) -> Option<Reading> {
        let o = self.scope(o)?;
        let exact = |value| {
            Some(Reading {
                value,
                lower_bound: false,
            })
        };
        match self.metric {
            Metric::Latency(l) => o.latency_ms.map(|ms| Reading {
                value: ms[l.index()],
                lower_bound: o.latency_lower_bound[l.index()],
            }),
            Metric::Failed => exact(o.failed_pct),
            Metric::Errors => exact(o.errors_pct),
            Metric::OkRate if self.threshold.unit == Unit::PerSecond => exact(o.ok_rate),
            Metric::OkRate => match o.demanded_rate {
                Some(d) if d > 0.0 => exact(o.ok_rate * 100.0 / d),
                _ => None,
            },
            Metric::Requests => exact(o.requests as f64),
        }
    }

    /// Three-valued: a lower bound `v` of the true value `x` (x >= v) proves `x > t` when `v > t`
    /// and disproves `x < t` when `v >= t`; anything else about it is unknown.
    pub fn evaluate(&self, o: &Observed) -> Truth {
        let Some(r) = self.read(o) else {
            return Truth::Unknown;
        };
        let t = self.threshold.canonical();
        let holds = self.cmp.holds(r.value, t);
        match (r.lower_bound, self.cmp) {
            (false, _) => {
                if holds {
                    Truth::True
                } else {
                    Truth::False
                }
            }
            (true, Cmp::Gt | Cmp::Ge) if holds => Truth::True,
            (true, Cmp::Lt | Cmp::Le) if !holds => Truth::False,
            (true, _) => Truth::Unknown,
        }
    }

    /// When the condition certainly holds, what was seen, e.g. "p99 812 ms > 500 ms".
    pub fn holds_because(&self, o: &Observed) -> Option<String> {
        if self.evaluate(o) != Truth::True {
            return None;
        }
        let r = self.read(o)?;
        let bound = if r.lower_bound { "≥" } else { "" };
        let t = self.threshold;
        let op = self.cmp.symbol();
        let name = self.subject();
        let scope = self.scope(o)?;
        Some(match (self.metric, t.unit) {
            (Metric::Latency(_), _) => {
                format!(
                    "{name} {bound}{} ms {op} {} {}",
                    num(r.value),
                    t.value,
                    t.unit.symbol()
                )
            }
            (Metric::OkRate, Unit::Percent) => format!(
                "{name} {}/s = {}% of {}/s demanded {op} {}%",
                num(scope.ok_rate),
                num(r.value),
                num(scope.demanded_rate.unwrap_or(0.0)),
                t.value
            ),
            (Metric::Requests, _) => format!("{name} {} {op} {}", r.value, t.value),
            (_, unit) => format!(
                "{name} {}{} {op} {}{}",
                num(r.value),
                unit.symbol(),
                t.value,
                unit.symbol()
            ),
        })
    }
}

/// A number for a sentence: whole above 100, three significant digits or so below.
fn num(v: f64) -> String {
    let s = if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A parse error: what is wrong and the column (1-based, in characters) where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionError {
    pub input: String,
    pub column: usize,
    /// Characters the caret line underlines (at least 1).
    pub width: usize,
    pub kind: ConditionErrorKind,
}

impl std::error::Error for ConditionError {}

impl ConditionError {
    /// Two lines: the expression, indented, and carets under the bad part.
    pub fn pointer(&self) -> String {
        format!(
            "    {}\n    {}{}",
            self.input,
            " ".repeat(self.column - 1),
            "^".repeat(self.width.max(1))
        )
    }
}

/// What is wrong; [`ConditionErrorKind::hint`] says what would be right.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConditionErrorKind {
    #[error("empty expression")]
    Empty,
    #[error("expected a metric, found '{0}'")]
    NoMetric(String),
    #[error("unknown metric '{0}'")]
    UnknownMetric(String),
    #[error("expected <, <=, > or >= after {metric}, found {found}")]
    NoOperator { metric: &'static str, found: String },
    #[error("expected a number after '{op}', found {found}")]
    NoNumber { op: &'static str, found: String },
    #[error("{} needs a unit", metric.name())]
    NoUnit { metric: Metric },
    #[error("unknown unit '{unit}'")]
    UnknownUnit { unit: String, metric: Metric },
    #[error("'{unit}' is not a unit of {}", metric.name())]
    WrongUnit { unit: &'static str, metric: Metric },
    #[error("{value}% is over 100%")]
    OverHundred { metric: Metric, value: f64 },
    #[error("unexpected '{0}' after the comparison")]
    Trailing(String),
    #[error("{} takes no request's name", metric.name())]
    NameNotTaken { metric: Metric },
    #[error("expected a request's name in [ ], found {found}")]
    NoName { found: String },
    #[error("expected ']' after the request's name, found {found}")]
    Unclosed { found: String },
}

/// "p50, p90, …, errors or ok_rate": every metric's canonical name, for messages.
pub fn metrics_text() -> String {
    let names: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
    match names.split_last() {
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

impl ConditionErrorKind {
    pub fn hint(&self) -> Option<String> {
        use ConditionErrorKind as K;
        Some(match self {
            K::Empty => "write e.g. p99>500ms".into(),
            K::NoMetric(_) | K::UnknownMetric(_) => format!("use {}", metrics_text()),
            K::NoOperator { .. } | K::NoNumber { .. } => return None,
            K::NoUnit { metric } | K::UnknownUnit { metric, .. } => {
                format!("{} takes {}", metric.name(), metric.units_text())
            }
            K::WrongUnit { metric, .. } => format!("use {}", metric.units_text()),
            K::OverHundred { metric, .. } => format!("{} is a share of requests", metric.name()),
            K::Trailing(_) => "one comparison per flag: repeat the flag for more".into(),
            K::NameNotTaken { .. } => {
                "a request's transport errors count in its failed share: use failed[name]".into()
            }
            K::NoName { .. } | K::Unclosed { .. } => {
                "write the name as the plan's [[request]] has it, e.g. p99[login]<200ms".into()
            }
        })
    }
}

impl fmt::Display for ConditionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at column {}", self.kind, self.column)?;
        match self.kind.hint() {
            Some(h) => write!(f, ": {h}"),
            None => Ok(()),
        }
    }
}

/// "'x'" or "the end", for messages.
fn found(s: &str) -> String {
    match s.chars().next() {
        None => "the end".into(),
        Some(c) => format!("'{c}'"),
    }
}

/// The input as characters with their columns, consumed left to right.
struct Cursor<'a> {
    input: &'a str,
    /// Byte offset of the next character.
    at: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        &self.input[self.at..]
    }

    fn column(&self) -> usize {
        self.input[..self.at].chars().count() + 1
    }

    fn skip_spaces(&mut self) {
        let rest = self.rest();
        self.at += rest.len() - rest.trim_start().len();
    }

    /// Takes the longest run of characters that satisfy `keep`; returns it and its column.
    fn take(&mut self, keep: impl Fn(char) -> bool) -> (&'a str, usize) {
        let column = self.column();
        let rest = self.rest();
        let end = rest.find(|c: char| !keep(c)).unwrap_or(rest.len());
        self.at += end;
        (&rest[..end], column)
    }
}

/// Where a part of an expression went wrong: its column, how many characters to underline, and why.
type Fault = (usize, usize, ConditionErrorKind);

/// Characters to underline for `s` (at least one).
fn width(s: &str) -> usize {
    s.chars().count().max(1)
}

pub fn parse(input: &str) -> Result<Condition, ConditionError> {
    let mut c = Cursor { input, at: 0 };
    parts(&mut c).map_err(|(column, width, kind)| ConditionError {
        input: input.to_string(),
        column,
        width,
        kind,
    })
}

/// The expression's parts in order: metric, comparison, number, unit, and nothing after.
fn parts(c: &mut Cursor<'_>) -> Result<Condition, Fault> {
    c.skip_spaces();
    if c.rest().is_empty() {
        return Err((1, 1, ConditionErrorKind::Empty));
    }
    let metric = metric_part(c)?;
    c.skip_spaces();
    let request = name_part(c, metric)?;
    c.skip_spaces();
    let cmp = cmp_part(c, metric)?;
    c.skip_spaces();
    let (value, number_col) = number_part(c, cmp)?;
    c.skip_spaces();
    let (unit, unit_end) = unit_part(c, metric)?;
    if matches!(metric, Metric::Failed | Metric::Errors) && value > 100.0 {
        return Err((
            number_col,
            unit_end - number_col,
            ConditionErrorKind::OverHundred { metric, value },
        ));
    }
    c.skip_spaces();
    if !c.rest().is_empty() {
        let col = c.column();
        let rest = c.rest().trim_end();
        return Err((
            col,
            width(rest),
            ConditionErrorKind::Trailing(rest.to_string()),
        ));
    }
    Ok(Condition {
        metric,
        request,
        cmp,
        threshold: Threshold { value, unit },
    })
}

/// A request's name in brackets after the metric, if any: the characters a plan's name may hold
/// (letters, digits, `_ . -`), checked against the plan's names by the caller.
fn name_part(c: &mut Cursor<'_>, metric: Metric) -> Result<Option<String>, Fault> {
    let Some(after) = c.rest().strip_prefix('[') else {
        return Ok(None);
    };
    let open = c.column();
    if !metric.takes_a_name() {
        let end = after.find(']').map_or(after.len(), |i| i + 1);
        return Err((
            open,
            width(&c.rest()[..end + 1]),
            ConditionErrorKind::NameNotTaken { metric },
        ));
    }
    c.at += 1;
    c.skip_spaces();
    let (name, col) = c.take(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '.' | '-'));
    if name.is_empty() {
        return Err((
            col,
            1,
            ConditionErrorKind::NoName {
                found: found(c.rest()),
            },
        ));
    }
    c.skip_spaces();
    let close = c.column();
    match c.rest().strip_prefix(']') {
        Some(_) => {
            c.at += 1;
            Ok(Some(name.to_string()))
        }
        None => Err((
            close,
            1,
            ConditionErrorKind::Unclosed {
                found: found(c.rest()),
            },
        )),
    }
}

fn metric_part(c: &mut Cursor<'_>) -> Result<Metric, Fault> {
    let (word, col) = c.take(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '.');
    if word.is_empty() {
        let bad = c
            .rest()
            .chars()
            .next()
            .map(String::from)
            .unwrap_or_default();
        return Err((col, 1, ConditionErrorKind::NoMetric(bad)));
    }
    Metric::parse(word).ok_or_else(|| {
        (
            col,
            width(word),
            ConditionErrorKind::UnknownMetric(word.to_string()),
        )
    })
}

fn cmp_part(c: &mut Cursor<'_>, metric: Metric) -> Result<Cmp, Fault> {
    let (op_text, col) = c.take(|ch| matches!(ch, '<' | '>' | '=' | '!'));
    match op_text {
        "<" => Ok(Cmp::Lt),
        "<=" => Ok(Cmp::Le),
        ">" => Ok(Cmp::Gt),
        ">=" => Ok(Cmp::Ge),
        "" => Err((
            col,
            1,
            ConditionErrorKind::NoOperator {
                metric: metric.name(),
                found: found(c.rest()),
            },
        )),
        other => Err((
            col,
            width(other),
            ConditionErrorKind::NoOperator {
                metric: metric.name(),
                found: format!("'{other}'"),
            },
        )),
    }
}

/// The threshold's number and its column.
fn number_part(c: &mut Cursor<'_>, cmp: Cmp) -> Result<(f64, usize), Fault> {
    let (digits, col) = c.take(|ch| ch.is_ascii_digit() || ch == '.');
    match digits.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok((v, col)),
        _ => {
            let (shown, w) = if digits.is_empty() {
                (found(c.rest()), 1)
            } else {
                (format!("'{digits}'"), width(digits))
            };
            Err((
                col,
                w,
                ConditionErrorKind::NoNumber {
                    op: cmp.symbol(),
                    found: shown,
                },
            ))
        }
    }
}

/// The threshold's unit (one the metric takes) and the column just past it.
fn unit_part(c: &mut Cursor<'_>, metric: Metric) -> Result<(Unit, usize), Fault> {
    let (unit_text, col) = c.take(|ch| ch.is_alphabetic() || ch == '%' || ch == '/');
    let end = col + width(unit_text);
    match Unit::parse(unit_text) {
        // A count is written bare: its "unit" is the end of the number.
        _ if unit_text.is_empty() && metric.units() == [Unit::Count] => Ok((Unit::Count, col)),
        _ if unit_text.is_empty() => Err((col, 1, ConditionErrorKind::NoUnit { metric })),
        None => Err((
            col,
            width(unit_text),
            ConditionErrorKind::UnknownUnit {
                unit: unit_text.to_string(),
                metric,
            },
        )),
        Some(u) if !metric.units().contains(&u) => Err((
            col,
            width(unit_text),
            ConditionErrorKind::WrongUnit {
                unit: u.symbol(),
                metric,
            },
        )),
        Some(u) => Ok((u, end)),
    }
}

impl FromStr for Condition {
    type Err = ConditionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

#[cfg(test)]
mod tests;
