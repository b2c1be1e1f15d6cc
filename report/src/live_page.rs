//! The live page: a run drawn as it happens (`stampede run|find-max --live ADDR`), and `live.html`
//! written at its end, both from the fold of its events ([`results::events::Live`]). The page is
//! the report's look (its CSS, its charts drawn by `chart`, no script from elsewhere); its dynamic
//! part is a [`View`] of sections rendered once per event and sent to every browser as it is.
//!
//! The page's contract with its readers (the browser test, the coordinator's stream):
//! - each section is a `<div data-section="ID">` whose content a `view` message replaces whole;
//!   the ids, in page order, are [`LIVE_SECTIONS`]. A `view` message's data is [`View::to_json`]:
//!   `{"last": N, "finished": BOOL, "sections": {"ID": "HTML", …}}`, N the last event folded in;
//! - within a section, each target is a `<section class="lane" data-lane="NAME">` (NAME
//!   as the run's `begin` event names it, empty for a run of one), headed by its name when there
//!   are several; ids repeat once per target, so side by side a reader scopes them by its section;
//! - `strip`: first the run's line (`data-k` `run`: running or over, `started`, `elapsed`: the
//!   seconds measured, `left`: the scheduled length less those, ≈), then per target its figures, each
//!   a `<dd data-k="NAME">` with its number (if any) in `data-v`: `step` (k of N, or `probe k`),
//!   `role` (a search's), `phase` (`running`, `written`), `value`, `at` (seconds into the step, or
//!   its length once written), `demanded`, `sent`, `served` (per second), `failed` (%), of the
//!   running step so far from its merged seconds, and once it is written, run.json's own numbers
//!   for it (`achieved_request_rate`, `ok_rate`, `failed_pct`); `status`, `answer` (run.json
//!   `summary.answer`, a search's `capacity.answer` once it ends); for a search `bracket`, with
//!   `passed` and `failed-at` (`data-v` the rates, absent while unknown);
//! - `charts`: the report's charts against the offered load (`data-chart`: a search's `search`
//!   first, then `rates`, `latency`, `failed` (the failed share), and with a server monitor
//!   `server` and `server-memory`), drawn as the report draws them from the run as last written;
//!   a baseline run's line under each, grey and dashed, its `data-n` starting `baseline: `;
//! - `current`: the running (or last) step second by second, `data-chart="current"` (sent/s,
//!   served/s, demanded) and `current-latency` (each second's p50 and p99);
//! - `agents`: `<table id="agents-live">`, header cells `<th data-col>` ([`AGENT_COLS`]), a row
//!   `<tr data-agent="NAME">` per agent, cells `<td data-col>`;
//! - `notes`: `<ol id="notes">`, the warnings (`data-kind="warning"`) then each written step's
//!   notes (`data-step`), newest last;
//! - `steps`: the report's `<table id="steps">`, cell for cell as steps.tsv has them; for a named
//!   mix, then the last written step's names, `<div id="requests-live" data-step="N">` around the
//!   report's table of a step's names (`<table class="requests">`, a `<tr data-name>` each; per
//!   step only: the merged seconds carry no names);
//! - `end`: empty until the run is over, then its status (`data-status` per target) and a link to
//!   its report;
//! - `<html data-last-event="N">`: the last event the page shows; `data-ready="1"` once its script
//!   ran, `data-errors` on a script error; `#live-state`'s `data-stream` how the stream is
//!   (`static` for a page without one, then `connecting`, `open`, `lost`, `closed`, `over`).
mod charts;
mod strip;
mod tables;

use std::fmt::Write;

use results::events::{Live, Target};
use results::run_file::RunFile;

pub use charts::BASELINE_PREFIX;
pub use tables::AGENT_COLS;

use crate::escape::html;
use crate::page::live_shell;

/// The live page's sections, in page order (the contract above).
pub const LIVE_SECTIONS: [&str; 7] = [
    "strip", "end", "charts", "current", "agents", "steps", "notes",
];

/// The page's dynamic part as of one event: each section's HTML, by id.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// The last event folded in.
    pub last: u64,
    /// Whether the run is over (the page stops following the stream).
    pub finished: bool,
    /// `(id, html)`, in [`LIVE_SECTIONS`] order.
    pub sections: Vec<(&'static str, String)>,
}

impl View {
    /// The view as a `view` message's data: one line of JSON.
    pub fn to_json(&self) -> String {
        let sections: serde_json::Map<String, serde_json::Value> = self
            .sections
            .iter()
            .map(|(id, h)| (id.to_string(), serde_json::Value::String(h.clone())))
            .collect();
        serde_json::json!({
            "last": self.last,
            "finished": self.finished,
            "sections": sections,
        })
        .to_string()
    }

    /// Section `id`'s HTML.
    pub fn section(&self, id: &str) -> Option<&str> {
        self.sections
            .iter()
            .find(|(k, _)| *k == id)
            .map(|(_, h)| h.as_str())
    }
}

/// What a target is called on the page: its name, else its run's label or target.
fn target_title(target: &Target) -> String {
    if !target.name.is_empty() {
        return target.name.clone();
    }
    target.run.as_ref().map_or_else(
        || "the target".into(),
        |r| r.label.clone().unwrap_or_else(|| r.target.clone()),
    )
}

/// Each target's part of a section, one after another.
fn per_target(live: &Live, part: impl Fn(&Target) -> String) -> String {
    let several = live.targets.len() > 1;
    let mut out = String::new();
    for target in &live.targets {
        let _ = writeln!(
            out,
            "<section class=\"lane\" data-lane=\"{}\">",
            html(&target.name)
        );
        if several {
            let _ = writeln!(out, "<h3>{}</h3>", html(&target_title(target)));
        }
        out.push_str(&part(target));
        out.push_str("</section>\n");
    }
    out
}

/// The page's sections as the events folded into `live` leave the run, a `baseline` run's lines
/// under its charts.
pub fn live_view(live: &Live, baseline: Option<&RunFile>) -> View {
    let search = live.begun.as_ref().is_some_and(|b| b.search);
    let section = |id: &'static str| -> String {
        match id {
            "strip" => {
                let mut out = strip::run_line(live);
                out.push_str(&per_target(live, |l| strip::target(l, search)));
                out
            }
            "end" => tables::end(live),
            "charts" => per_target(live, |l| match &l.run {
                None => "<p class=\"note\">The run has not started yet.</p>\n".into(),
                Some(run) => {
                    let pending = l.current.as_ref().filter(|c| !c.done && c.start.step > 0);
                    charts::against_load(run, pending.map(|c| c.start.value), baseline)
                }
            }),
            "current" => per_target(live, |l| match &l.current {
                None => "<p class=\"note\">No step has started yet.</p>\n".into(),
                Some(c) => {
                    let model = l.run.as_ref().map_or("requests", |r| r.model().name());
                    charts::current(c, model)
                }
            }),
            "agents" => per_target(live, tables::agents),
            "steps" => per_target(live, |l| match &l.run {
                Some(run) => {
                    let mut out = crate::run_page::tables::steps(run);
                    out.push_str(&tables::requests(run));
                    out
                }
                None => String::new(),
            }),
            "notes" => per_target(live, tables::notes),
            _ => unreachable!("a section of LIVE_SECTIONS"),
        }
    };
    View {
        last: live.last,
        finished: live.finished,
        sections: LIVE_SECTIONS.iter().map(|id| (*id, section(id))).collect(),
    }
}

/// The live page's own CSS: the stream's state, the targets' sections, the strip's figures; a row of charts
/// keeps its columns when it holds one chart (the failed share without a monitor), rather than
/// stretching it across the page as the report's rows of several do.
const STYLE: &str = ".live-state{display:inline-block;padding:2px 8px;border-radius:3px;background:#eee;color:#333}\
.live-state[data-stream=open]{background:#e3f4e1;color:#1b5e20}.live-state[data-stream=lost],.live-state[data-stream=closed]{background:#fde8c8;color:#8a4b00}\
.live-state[data-stream=over]{background:#e6eef8}section.lane{border-left:3px solid #ddd;padding-left:.8em;margin:.6em 0}\
section.lane h3{margin:.2em 0}.figures{margin:.3em 0}.figures dd{font-weight:600;font-variant-numeric:tabular-nums}\
.run-line{color:#444}.run-line .note,.lane .note,.bracket .note{color:#666;font-size:12px;margin:.2em 0}.bracket{margin:.2em 0}\
.end{background:#e6eef8;padding:.4em .8em}#agents-live caption{text-align:left;color:#666;font-size:12px}#notes{padding-left:2em}\
#agents-live td:first-child,table.requests td:first-child{text-align:left}\
section.lane .strip{grid-template-columns:repeat(auto-fill,minmax(20em,1fr))}";

/// Each section's heading on the page (outside it: a view replaces only what is inside).
fn heading(id: &str) -> &'static str {
    match id {
        "charts" => "<h2>Against the offered load</h2>\n",
        "current" => "<h2>The step running, second by second</h2>\n",
        "agents" => "<h2>Agents</h2>\n",
        "steps" => "<h2>Steps written</h2>\n",
        "notes" => "<h2>Warnings and notes</h2>\n",
        _ => "",
    }
}

/// The whole live page with `live`'s view in it, so a browser opened mid-run sees the run so far
/// at once. With a `stream` (the URL of the coordinator's event stream, relative to the page), its
/// script follows the run; without, it is the final page (`live.html`).
pub fn live_page(live: &Live, baseline: Option<&RunFile>, stream: Option<&str>) -> String {
    let names: Vec<String> = live.targets.iter().map(target_title).collect();
    let title = match names.is_empty() {
        true => "stampede live".to_string(),
        false => format!("stampede live: {}", names.join(", ")),
    };
    let mut body = format!("<h1>{}</h1>\n", html(&title));
    let (state, words) = match stream {
        Some(_) if !live.finished => ("connecting", "connecting to the run…"),
        Some(_) => ("over", "the run is over: this page is final"),
        None => ("static", "the run as its events left it"),
    };
    let _ = writeln!(
        body,
        "<p><span id=\"live-state\" class=\"live-state\" data-stream=\"{state}\">{words}</span></p>"
    );
    for (id, h) in live_view(live, baseline).sections {
        body.push_str(heading(id));
        let _ = write!(body, "<div data-section=\"{id}\">\n{h}</div>\n");
    }
    let data = serde_json::json!({
        "schema": "stampede.live/1",
        "last": live.last,
        "finished": live.finished,
        "stream": stream,
    })
    .to_string();
    // A search draws shaped markers and levels, as its report does.
    let style = format!(
        "{STYLE}{}{}",
        crate::chart::MARK_STYLE,
        crate::run_page::search::STYLE
    );
    live_shell(&title, &style, &body, &data)
}

/// A run's events as the coordinator emits them, made from its run.json (for tests): the begin, the
/// run with no step, per step its start, a merged second per `reply_rate_series` entry and the
/// step with the summary after it, the end, and the finish.
#[cfg(test)]
pub(crate) mod fixture {
    use results::events::{AgentShare, End, Event, Interval, Line, SCHEMA, StepStart};
    use results::run_file::{RunFile, RunStatus};
    use results::step::{StepResult, summarize_run};

    pub fn golden() -> RunFile {
        let text = include_str!("../../results/tests/golden/run.json");
        RunFile::parse(text, std::path::Path::new("run.json")).unwrap()
    }

    pub fn golden_search() -> RunFile {
        let text = include_str!("../../results/tests/golden/find-max-run/run.json");
        RunFile::parse(text, std::path::Path::new("run.json")).unwrap()
    }

    /// The start of `s`, as the coordinator would have announced it.
    pub fn start(run: &RunFile, s: &StepResult) -> StepStart {
        let n = s.agents.len().max(1) as f64;
        StepStart {
            step: s.number,
            steps: (!run.is_search()).then_some(run.steps.len()),
            role: s.probe.as_ref().map(|p| p.role.name().to_string()),
            value: s.step_value,
            demanded: s.demanded_rate,
            length_s: s.duration_s,
            agents: s
                .agents
                .iter()
                .map(|a| AgentShare {
                    agent: a.agent.clone(),
                    share: s.step_value / n,
                })
                .collect(),
        }
    }

    /// Step `s`'s merged seconds: one per entry of its `reply_rate_series` (at least one).
    pub fn seconds(s: &StepResult) -> Vec<Interval> {
        let n = s.reply_rate_series.len().max(1);
        let sent = s.requests / n as u64;
        let mut so_far = 0;
        (0..n)
            .map(|k| {
                let ok = s.reply_rate_series.get(k).map_or(s.ok, |r| *r as u64);
                so_far += sent;
                Interval {
                    step: s.number,
                    at_s: k as f64,
                    length_s: 1.0,
                    sent,
                    ok,
                    failed: s.failed / n as u64,
                    p50_ms: Some(s.latency_ms.p50),
                    // A little ragged, as seconds are.
                    p99_ms: Some(s.latency_ms.p99 * (1.0 + 0.1 * (k % 4) as f64)),
                    sent_so_far: so_far,
                    agents_sent: s
                        .agents
                        .iter()
                        .map(|_| so_far / s.agents.len() as u64)
                        .collect(),
                    merged_unix_ms: 0,
                }
            })
            .collect()
    }

    pub fn events(run: &RunFile) -> Vec<Line> {
        let mut out = Vec::new();
        let mut push = |event: Event| {
            let id = out.len() as u64 + 1;
            out.push(Line { id, event });
        };
        let total: f64 = run.steps.iter().map(|s| s.duration_s).sum();
        push(Event::Begin {
            schema: SCHEMA.into(),
            targets: vec![String::new()],
            search: run.is_search(),
            total_s: total + 10.0,
            started_at: run.started_at.clone(),
        });
        let mut first = run.clone();
        first.steps.clear();
        first.summary = None;
        first.status = RunStatus::Running;
        first.finished_at = None;
        first.stopped = None;
        first.fail_on = None;
        first.capacity = None;
        push(Event::Run {
            target: 0,
            run: Box::new(first),
        });
        for (i, s) in run.steps.iter().enumerate() {
            push(Event::StepStart {
                target: 0,
                step: start(run, s),
            });
            for interval in seconds(s) {
                push(Event::Interval {
                    target: 0,
                    interval,
                });
            }
            let summary = match i + 1 == run.steps.len() {
                true => run.summary.clone(),
                false if run.is_search() => None,
                false => Some(summarize_run(&run.steps[..=i])),
            };
            push(Event::Step {
                target: 0,
                step: Box::new(s.clone()),
                summary: summary.map(Box::new),
            });
        }
        push(Event::End {
            target: 0,
            end: Box::new(End::of(run)),
        });
        push(Event::Finished {
            report: Some("report.html".into()),
        });
        out
    }

    /// `run`'s events folded up to (and with) the first `n`.
    pub fn folded(run: &RunFile, n: usize) -> results::events::Live {
        let mut live = results::events::Live::default();
        for l in events(run).iter().take(n) {
            live.apply(l).unwrap();
        }
        live
    }
}

#[cfg(test)]
mod tests {
    use results::events::{Event, Live};
    use results::run_file::RunFile;
    use results::step::StepResult;

    use super::fixture::{events, folded, golden, golden_search};
    use super::*;

    fn all(run: &RunFile) -> Live {
        folded(run, usize::MAX)
    }

    /// The events up to the `k`th interval of step `step` (the step running, k seconds in).
    fn running(run: &RunFile, step: u32, k: usize) -> Live {
        let evs = events(run);
        let at = evs
            .iter()
            .position(|l| matches!(&l.event, Event::StepStart { step: s, .. } if s.step == step))
            .unwrap();
        folded(run, at + 1 + k)
    }

    /// The text of the first `data-k="k"` element in `html`, and its `data-v`.
    fn figure<'a>(html: &'a str, k: &str) -> (&'a str, Option<&'a str>) {
        let at = html
            .find(&format!("data-k=\"{k}\""))
            .unwrap_or_else(|| panic!("no {k} in {html}"));
        let rest = &html[at..];
        let open = rest.find('>').unwrap();
        let v = rest[..open]
            .split("data-v=\"")
            .nth(1)
            .map(|v| v.split('"').next().unwrap());
        let text = &rest[open + 1..];
        (&text[..text.find('<').unwrap()], v)
    }

    #[test]
    fn a_named_mix_shows_its_last_written_step_by_name_and_an_unnamed_run_nothing() {
        let plain = all(&golden());
        let steps = live_view(&plain, None);
        assert!(!steps.section("steps").unwrap().contains("requests-live"));
        let run = crate::run_page::requests::tests::named(&["home", "slow"]);
        // Two steps written, the third running: its names are not known yet.
        let live = running(&run, 3, 1);
        let view = live_view(&live, None);
        let section = view.section("steps").unwrap();
        assert!(
            section.contains("<div id=\"requests-live\" data-step=\"2\">"),
            "{section}"
        );
        assert!(section.contains("<tr data-name=\"home\">"), "{section}");
        assert!(section.contains("<tr data-name=\"slow\">"), "{section}");
        let last = run.steps.last().unwrap().number;
        let view = live_view(&all(&run), None);
        assert!(
            view.section("steps")
                .unwrap()
                .contains(&format!("<div id=\"requests-live\" data-step=\"{last}\">"))
        );
    }

    #[test]
    fn the_fold_of_a_run_s_events_is_its_run_json_and_draws_its_steps_table() {
        let run = golden();
        let live = all(&run);
        assert_eq!(live.targets[0].run.as_ref(), Some(&run));
        let view = live_view(&live, None);
        let steps = view.section("steps").unwrap();
        let table = crate::run_page::tables::steps(&run);
        assert!(steps.contains(&table), "{steps}");
        assert_eq!(steps.matches("<tr>").count(), run.steps.len() + 1);
        let ids: Vec<&str> = view.sections.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, LIVE_SECTIONS);
    }

    #[test]
    fn the_strip_of_a_running_step_adds_up_its_seconds_and_of_a_written_one_is_run_json_s() {
        let mut run = golden();
        let s3 = run.steps[2].clone();
        // Three seconds of step 3 (of the golden's one each): a step of four, so it is mid-way.
        run.steps[2].reply_rate_series = vec![300.0, 290.0, 280.0, 270.0];
        run.steps[2].requests = 1200;
        run.steps[2].failed = 40;
        let live = running(&run, 3, 3);
        let strip = live_view(&live, None).section("strip").unwrap().to_string();
        assert_eq!(figure(&strip, "step").0, "3 of 6");
        assert_eq!(figure(&strip, "phase").0, "running");
        assert_eq!(figure(&strip, "at").1, Some("3"));
        assert_eq!(figure(&strip, "demanded").1, Some("300"));
        // 300 sent and 10 failed a second, (300 + 290 + 280) / 3 served.
        assert_eq!(figure(&strip, "sent").1, Some("300"));
        assert_eq!(figure(&strip, "served").1, Some("290"));
        assert_eq!(figure(&strip, "failed").1, Some("3.333"));
        assert_eq!(figure(&strip, "status").0, "running");
        let answer = run.steps[..2].to_vec();
        assert_eq!(
            figure(&strip, "answer").0,
            html(&results::step::summarize_run(&answer).answer)
        );
        // Two steps of 1 s written and 3 s of the third, of 6 + 10 s scheduled... less the longer third.
        assert_eq!(figure(&strip, "elapsed").1, Some("5"));
        let total: f64 = run.steps.iter().map(|s| s.duration_s).sum::<f64>() + 10.0;
        assert_eq!(
            figure(&strip, "left").1,
            Some(&*results::step::tsv_number(total - 5.0))
        );

        // Once written, the step's own numbers.
        let run = golden();
        let evs = events(&run);
        let written = evs
            .iter()
            .position(|l| matches!(&l.event, Event::Step { step, .. } if step.number == 3))
            .unwrap();
        let strip = live_view(&folded(&run, written + 1), None)
            .section("strip")
            .unwrap()
            .to_string();
        assert_eq!(figure(&strip, "phase").0, "written");
        let num = |v: f64| results::step::tsv_number(v);
        assert_eq!(
            figure(&strip, "sent").1,
            Some(&*num(s3.achieved_request_rate))
        );
        assert_eq!(figure(&strip, "served").1, Some(&*num(s3.ok_rate)));
        assert_eq!(figure(&strip, "failed").1, Some(&*num(s3.failed_pct)));
    }

    #[test]
    fn a_search_s_strip_says_its_probe_and_role_and_the_bracket_its_marks_close() {
        let run = golden_search();
        // Probe 7 (a bisect) running: 800 passed, 1131 and 1600 failed so far.
        let live = running(&run, 7, 0);
        let strip = live_view(&live, None).section("strip").unwrap().to_string();
        assert_eq!(figure(&strip, "step").0, "probe 7");
        assert_eq!(figure(&strip, "role").0, "bisect");
        assert_eq!(figure(&strip, "passed").1, Some("800"));
        assert_eq!(figure(&strip, "failed-at").1, Some("1131.371"));
        // At the end, the search's own answer: 800 passed, 951 failed.
        let strip = live_view(&all(&run), None)
            .section("strip")
            .unwrap()
            .to_string();
        let c = run.capacity.as_ref().unwrap();
        assert_eq!(
            figure(&strip, "failed-at")
                .1
                .map(|v| v.parse::<f64>().unwrap()),
            Some((c.lowest_fail.as_ref().unwrap().offered * 1000.0).round() / 1000.0)
        );
        assert_eq!(figure(&strip, "passed").1, Some("800"));
        assert!(strip.contains(&html(&c.answer)));
        // Before any probe is marked, none is known.
        let early = live_view(&running(&run, 1, 0), None)
            .section("strip")
            .unwrap()
            .to_string();
        assert_eq!(figure(&early, "passed"), ("none passed yet", None));
    }

    #[test]
    fn a_baseline_is_drawn_under_every_chart_against_the_load() {
        let run = golden();
        let mut base = golden();
        base.label = Some("last week".into());
        for s in &mut base.steps {
            s.ok_rate *= 0.9;
        }
        let live = running(&run, 3, 1);
        let charts = live_view(&live, Some(&base))
            .section("charts")
            .unwrap()
            .to_string();
        for (chart, series) in [
            ("rates", "served"),
            ("latency", "p99"),
            ("failed", "failed"),
        ] {
            let at = charts.find(&format!("data-chart=\"{chart}\"")).unwrap();
            let fig = &charts[at..at + charts[at..].find("</figure>").unwrap()];
            assert!(
                fig.contains(&format!("data-n=\"{BASELINE_PREFIX}{series}\"")),
                "{chart}: {fig}"
            );
        }
        // The baseline's six steps are drawn though the run has written two: a line of six
        // vertices, `M x y` then five steps `l dx dy`.
        let at = charts.find("data-n=\"baseline: served\"").unwrap();
        let g = &charts[at..at + charts[at..].find("</g>").unwrap()];
        let d = g.split(" d=\"").nth(1).unwrap().split('"').next().unwrap();
        let steps = d.split('l').nth(1).unwrap().replace('-', " -");
        assert_eq!(steps.split_whitespace().count(), 2 * 5, "{g}");
        assert!(charts.contains("the baseline, last week (6 steps)"));
        assert!(
            !live_view(&live, None)
                .section("charts")
                .unwrap()
                .contains("baseline")
        );
    }

    #[test]
    fn every_value_from_the_run_is_text() {
        let mut run = golden();
        let payload = "<script>alert(1)</script>";
        run.steps[0].notes.push(payload.into());
        run.warnings.push(payload.into());
        run.label = Some(payload.into());
        run.steps[0].agents[0].agent = payload.into();
        let mut live = all(&run);
        live.targets[0].name = payload.into();
        live.report = Some(format!("\"><{payload}"));
        let page = live_page(&live, None, Some(payload));
        let view = live_view(&live, None).to_json();
        for text in [&page, &view] {
            assert!(!text.contains("<script>alert"), "{text}");
        }
        assert_eq!(page.matches("<script").count(), 2, "only the page's own");
        assert!(page.contains("step 1 (100): &lt;script&gt;alert(1)&lt;/script&gt;"));
    }

    /// The golden run made ten steps of 30 s, each with a server monitor's view, 30 merged seconds
    /// and a note: a realistic run's page.
    fn ten_steps() -> RunFile {
        let mut run = golden();
        let template = run.steps[5].clone();
        let mut second = template.agents[0].clone();
        second.agent = "agent-2".into();
        run.steps = (1..=10)
            .map(|n| {
                // A server that serves up to 650/s, its p99 rising past it.
                let v = 100.0 * n as f64;
                let served = v.min(650.0);
                let mut monitor = crate::run_page::server::example("web1", served / 7.0);
                monitor.partial = false;
                let mut latency = template.latency_ms;
                latency.p50 = 2.0 + (v - served) / 4.0;
                latency.p90 = 5.0 + (v - served) / 2.0;
                latency.p99 = 9.0 + (v - served) * 1.5;
                latency.p999 = 15.0 + (v - served) * 2.0;
                latency.max = 30.0 + (v - served) * 3.0;
                let mut reply_rate = template.reply_rate;
                (reply_rate.min, reply_rate.avg, reply_rate.max) =
                    (served - 3.0, served - 1.0, served);
                let requests = (v * 30.0) as u64;
                let ok = (served * 30.0) as u64;
                StepResult {
                    number: n,
                    step_value: v,
                    demanded_rate: Some(v),
                    duration_s: 30.0,
                    requests,
                    replies: ok,
                    ok,
                    due: requests,
                    failed: requests - ok,
                    failed_pct: 100.0 * (requests - ok) as f64 / requests as f64,
                    ok_rate: served,
                    achieved_request_rate: v,
                    latency_ms: latency,
                    reply_rate,
                    reply_rate_series: (0..30).map(|k| served - (k % 3) as f64).collect(),
                    notes: vec![format!("step {n}'s note")],
                    server_monitors: vec![monitor],
                    agents: vec![template.agents[0].clone(), second.clone()],
                    ..template.clone()
                }
            })
            .collect();
        run.summary = Some(results::step::summarize_run(&run.steps));
        run
    }

    #[test]
    fn a_finished_ten_step_run_s_page_stays_under_100_kb() {
        let run = ten_steps();
        let live = all(&run);
        let page = live_page(&live, Some(&golden()), None);
        assert!(page.len() < 100_000, "{} bytes", page.len());
        let view = live_view(&live, Some(&golden())).to_json();
        assert!(view.len() < 100_000, "{} bytes", view.len());
        assert!(!view.contains('\n'), "one line: an SSE data field");
        // And it has what it should.
        for chart in [
            "rates",
            "latency",
            "failed",
            "server",
            "server-memory",
            "current",
        ] {
            assert!(page.contains(&format!("data-chart=\"{chart}\"")), "{chart}");
        }
        assert!(page.contains("<a href=\"report.html\">report.html</a>"));
    }

    #[test]
    fn the_end_is_empty_until_the_run_is_over() {
        let run = golden();
        let evs = events(&run);
        let before = folded(&run, evs.len() - 1);
        assert_eq!(live_view(&before, None).section("end"), Some(""));
        let end = live_view(&all(&run), None)
            .section("end")
            .unwrap()
            .to_string();
        assert!(end.contains("data-status=\"completed\""), "{end}");
    }

    #[test]
    fn the_agents_table_has_a_row_per_agent_with_its_share_and_sent_so_far() {
        let run = golden();
        let live = running(&run, 4, 1);
        let agents = live_view(&live, None)
            .section("agents")
            .unwrap()
            .to_string();
        for a in &run.steps[3].agents {
            let at = agents
                .find(&format!("<tr data-agent=\"{}\">", a.agent))
                .unwrap_or_else(|| panic!("{}: {agents}", a.agent));
            let row = &agents[at..at + agents[at..].find("</tr>").unwrap()];
            // The last written step (3) says its CPU and the fleet's trust.
            let three = run.steps[2]
                .agents
                .iter()
                .find(|x| x.agent == a.agent)
                .unwrap();
            assert!(
                row.contains(&format!(
                    "<td data-col=\"cpu_pct\">{}</td>",
                    results::step::tsv_number(three.cpu_pct)
                )),
                "{row}"
            );
            assert!(row.contains(&format!(
                "<td data-col=\"trust\">{}</td>",
                run.steps[2].trust.name()
            )));
        }
        assert!(agents.contains("<th data-col=\"share\">"));
    }

    #[test]
    fn the_page_carries_the_view_and_follows_the_stream_only_when_given_one() {
        let run = golden();
        let live = running(&run, 2, 1);
        let live_one = live_page(&live, None, Some("events?token=a&b"));
        assert!(live_one.contains("\"stream\":\"events?token=a\\u0026b\""));
        assert!(live_one.contains("data-stream=\"connecting\""));
        let still = live_page(&live, None, None);
        assert!(still.contains("\"stream\":null") && still.contains("data-stream=\"static\""));
        let view = live_view(&live, None);
        for (id, h) in &view.sections {
            assert!(still.contains(&format!("<div data-section=\"{id}\">\n{h}</div>")));
        }
        let json: serde_json::Value = serde_json::from_str(&view.to_json()).unwrap();
        assert_eq!(json["last"], live.last);
        assert_eq!(json["sections"]["steps"], view.section("steps").unwrap());
    }

    #[test]
    fn side_by_side_each_section_holds_each_target_under_its_name() {
        let mut live = all(&golden());
        let mut other = live.targets[0].clone();
        live.targets[0].name = "nginx".into();
        other.name = "app".into();
        other.run.as_mut().unwrap().steps.truncate(2);
        live.targets.push(other);
        let view = live_view(&live, None);
        for (id, h) in &view.sections {
            if *id == "end" {
                continue;
            }
            let nginx = h.find("<section class=\"lane\" data-lane=\"nginx\">\n<h3>nginx</h3>");
            let app = h.find("<section class=\"lane\" data-lane=\"app\">\n<h3>app</h3>");
            assert!(nginx.unwrap() < app.unwrap(), "{id}");
        }
        let steps = view.section("steps").unwrap();
        let app = &steps[steps.find("data-lane=\"app\"").unwrap()..];
        assert_eq!(app.matches("<tr>").count(), 2 + 1);
        // The targets take turns on one fleet: their times add up.
        let strip = view.section("strip").unwrap();
        assert_eq!(figure(strip, "elapsed").1, Some("8"));
        let end = view.section("end").unwrap();
        assert!(end.contains("data-lane=\"app\" data-status=\"completed\">app: completed"));
    }

    /// Pages to look at as a person would (`STAMPEDE_LOOK=DIR cargo test -p report -- --ignored
    /// pages_to_look_at`, then open DIR/live-*.html): mid-run against a baseline, a search
    /// mid-way, and a finished run's static page.
    #[test]
    #[ignore = "writes pages to look at"]
    fn pages_to_look_at() {
        let dir = std::path::PathBuf::from(std::env::var("STAMPEDE_LOOK").unwrap_or("/tmp".into()));
        let run = ten_steps();
        let mut base = ten_steps();
        base.label = Some("last week".into());
        for s in &mut base.steps {
            s.ok_rate *= 1.1;
            s.latency_ms.p99 *= 0.7;
        }
        let write = |name: &str, page: String| std::fs::write(dir.join(name), page).unwrap();
        write(
            "live-running.html",
            live_page(&running(&run, 7, 12), Some(&base), Some("events")),
        );
        write("live.html", live_page(&all(&run), None, None));
        let search = golden_search();
        write(
            "live-search.html",
            live_page(&running(&search, 7, 0), None, None),
        );
        // A stream to serve by hand: the page as of the run's begin, then each event's view.
        write(
            "live-stream.html",
            live_page(&folded(&run, 2), None, Some("events")),
        );
        let mut live = Live::default();
        let mut views = String::new();
        for l in events(&run) {
            live.apply(&l).unwrap();
            views.push_str(&live_view(&live, None).to_json());
            views.push('\n');
        }
        write("live-views.ndjson", views);
    }
}
