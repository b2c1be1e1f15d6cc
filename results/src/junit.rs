//! `--junit FILE`: a run's, a search's or a comparison's verdicts as the JUnit XML that CI systems
//! (GitLab, Jenkins, GitHub's test reporters) read, so a pipeline shows which condition failed
//! without parsing stdout. A testcase per condition as written, its failure message the words
//! stdout and stderr already say (a [`Breach::sentence`], a [`Judged::sentence`], a capacity's
//! answer): never a second wording. Built from run.json ([`RunFile`]) alone, so what the file
//! says is what the results say. Pure: the coordinator writes the text where the user named.
use std::fmt::Write;

use crate::compare::Judged;
use crate::run_file::{RunFile, RunStatus};

/// One testcase's end.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Passed,
    /// A condition that did not hold: `<failure message type>text</failure>`.
    Failed {
        message: String,
        kind: String,
        text: String,
    },
    /// The thing itself did not complete (the run errored or was aborted): `<error>`.
    Errored {
        message: String,
        kind: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The condition as stampede spells it (`--fail-on p99>500ms`), or `run`, `capacity`, `compare`.
    pub name: String,
    pub time_s: f64,
    pub outcome: Outcome,
}

/// One target's (or one comparison's) cases.
#[derive(Debug, Clone, PartialEq)]
pub struct Suite {
    /// The run's label, else its target's origin; `compare` for a comparison. Each case's
    /// classname too.
    pub name: String,
    /// When it started (RFC 3339), when known.
    pub timestamp: Option<String>,
    pub time_s: f64,
    pub cases: Vec<Case>,
}

impl Suite {
    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.cases.iter().filter(|c| f(&c.outcome)).count()
    }

    fn failures(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Failed { .. }))
    }

    fn errors(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Errored { .. }))
    }

    /// A suite of one errored case `name`: what a command that ended in error before any run.json
    /// says of itself.
    pub fn errored(suite: &str, case: &str, message: &str) -> Suite {
        Suite {
            name: suite.to_string(),
            timestamp: None,
            time_s: 0.0,
            cases: vec![Case {
                name: case.to_string(),
                time_s: 0.0,
                outcome: Outcome::Errored {
                    message: message.to_string(),
                    kind: "error".into(),
                },
            }],
        }
    }
}

/// A run's suite (a planned run or a capacity search) from its run.json: the run itself (an
/// `<error>` unless it completed; `error` is what ended it, as stderr said it), each `--fail-on`
/// (failed when a step breached it, with every breach's sentence), and for a search each `--slo`
/// and the capacity found.
pub fn of_run(run: &RunFile, error: Option<&str>) -> Suite {
    let name = run.label.clone().unwrap_or_else(|| run.target.clone());
    let time_s: f64 = run.steps.iter().map(|s| s.duration_s).sum::<f64>()
        + run.warmup.as_ref().map_or(0.0, |w| w.duration_s);
    let mut cases = vec![Case {
        name: "run".into(),
        time_s,
        outcome: match (run.status, error) {
            (RunStatus::Completed, None) => Outcome::Passed,
            (status, error) => Outcome::Errored {
                message: error.map_or_else(|| format!("the run {status}"), str::to_string),
                kind: status.name().to_string(),
            },
        },
    }];
    for (expression, said) in run.fail_on_verdicts() {
        cases.push(Case {
            name: format!("--fail-on {expression}"),
            time_s: 0.0,
            outcome: match said.first() {
                None => Outcome::Passed,
                Some(first) => Outcome::Failed {
                    message: first.clone(),
                    kind: "fail-on".into(),
                    text: said.join("\n"),
                },
            },
        });
    }
    if let Some(c) = &run.capacity {
        for slo in &c.slos {
            // A search's SLOs hold at the rate it found. One fails when no rate passed and it
            // is what failed the lowest rate (the lowest fail's reason says so); what else ended
            // a search (the generator, a deadline) is the capacity's case, not an SLO's.
            let outcome = match (&c.max_rate, &c.lowest_fail) {
                (None, Some(f)) if f.slo.as_deref() == Some(slo.as_str()) => Outcome::Failed {
                    message: f.reason.clone(),
                    kind: "slo".into(),
                    text: c.answer.clone(),
                },
                _ => Outcome::Passed,
            };
            cases.push(Case {
                name: format!("--slo {slo}"),
                time_s: 0.0,
                outcome,
            });
        }
        cases.push(Case {
            name: "capacity".into(),
            time_s: c.elapsed_s,
            outcome: match c.exit_code {
                0 => Outcome::Passed,
                code => Outcome::Failed {
                    message: c.answer.clone(),
                    kind: c.status.name().to_string(),
                    text: format!("status: {} (exit {code})", c.status.name()),
                },
            },
        });
    }
    Suite {
        name,
        timestamp: Some(run.started_at.clone()),
        time_s,
        cases,
    }
}

/// A comparison's suite: that it was made, each `--regression` gate (failed with its sentence
/// when it breached), and `--fail-on-regression` when given (`regressed`: its verdict and the
/// regressions in words, as stderr says them).
pub fn of_compare(gates: &[Judged], regressed: Option<(bool, &str)>) -> Suite {
    let mut cases = vec![Case {
        name: "compare".into(),
        time_s: 0.0,
        outcome: Outcome::Passed,
    }];
    for g in gates {
        cases.push(Case {
            name: format!("--regression {}", g.gate),
            time_s: 0.0,
            outcome: match g.breaches.is_empty() {
                true => Outcome::Passed,
                false => Outcome::Failed {
                    message: g.sentence(),
                    kind: "regression".into(),
                    text: g.breaches.join("\n"),
                },
            },
        });
    }
    if let Some((worse, words)) = regressed {
        cases.push(Case {
            name: "--fail-on-regression".into(),
            time_s: 0.0,
            outcome: match worse {
                false => Outcome::Passed,
                true => Outcome::Failed {
                    message: words.lines().next().unwrap_or_default().to_string(),
                    kind: "regression".into(),
                    text: words.trim_end().to_string(),
                },
            },
        });
    }
    Suite {
        name: "compare".into(),
        timestamp: None,
        time_s: 0.0,
        cases,
    }
}

/// The file: `<testsuites name=command>` holding every suite, each value escaped.
pub fn render(command: &str, suites: &[Suite]) -> String {
    let sum = |f: &dyn Fn(&Suite) -> usize| suites.iter().map(f).sum::<usize>();
    let time: f64 = suites.iter().map(|s| s.time_s).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{time:.3}\">",
        escape(command),
        sum(&|s| s.cases.len()),
        sum(&Suite::failures),
        sum(&Suite::errors),
    );
    for s in suites {
        let _ = write!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\" time=\"{:.3}\"",
            escape(&s.name),
            s.cases.len(),
            s.failures(),
            s.errors(),
            s.time_s
        );
        if let Some(t) = &s.timestamp {
            let _ = write!(out, " timestamp=\"{}\"", escape(t));
        }
        out.push_str(">\n");
        for c in &s.cases {
            let _ = write!(
                out,
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
                escape(&s.name),
                escape(&c.name),
                c.time_s
            );
            match &c.outcome {
                Outcome::Passed => out.push_str("/>\n"),
                Outcome::Failed {
                    message,
                    kind,
                    text,
                } => {
                    let _ = writeln!(
                        out,
                        ">\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>",
                        escape(message),
                        escape(kind),
                        escape(text)
                    );
                }
                Outcome::Errored { message, kind } => {
                    let _ = writeln!(
                        out,
                        ">\n      <error message=\"{}\" type=\"{}\">{}</error>\n    </testcase>",
                        escape(message),
                        escape(kind),
                        escape(message)
                    );
                }
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// A value as XML 1.0 text or attribute: the five markup characters and the whitespace an
/// attribute would fold as references; the characters XML 1.0 cannot hold at all (control
/// characters, lone surrogates cannot occur in a `str`) as U+FFFD.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            '\u{0}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(message: &str) -> Outcome {
        Outcome::Failed {
            message: message.into(),
            kind: "fail-on".into(),
            text: message.into(),
        }
    }

    #[test]
    fn counts_add_up_per_suite_and_in_all() {
        let suite = Suite {
            name: "a".into(),
            timestamp: Some("2026-01-01T00:00:00.000Z".into()),
            time_s: 2.0,
            cases: vec![
                Case {
                    name: "run".into(),
                    time_s: 2.0,
                    outcome: Outcome::Passed,
                },
                Case {
                    name: "--fail-on p99>1ms".into(),
                    time_s: 0.0,
                    outcome: failed("--fail-on p99>1ms: step 1 (10): p99 5 ms > 1 ms"),
                },
            ],
        };
        let xml = render(
            "stampede run",
            &[suite.clone(), Suite::errored("b", "run", "boom")],
        );
        assert!(
            xml.contains(
                "<testsuites name=\"stampede run\" tests=\"3\" failures=\"1\" errors=\"1\" time=\"2.000\">"
            ),
            "{xml}"
        );
        assert!(xml.contains(
            "<testsuite name=\"a\" tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"0\" time=\"2.000\" timestamp=\"2026-01-01T00:00:00.000Z\">"
        ));
        assert!(xml.contains("<error message=\"boom\" type=\"error\">boom</error>"));
        assert!(xml.contains("<testcase classname=\"a\" name=\"run\" time=\"2.000\"/>"));
    }

    #[test]
    fn hostile_names_and_words_are_escaped_never_markup() {
        let hostile = "x\"/><evil a='1'>&amp;]]>\u{1}\n";
        let suite = Suite {
            name: hostile.into(),
            timestamp: Some(hostile.into()),
            time_s: 0.0,
            cases: vec![Case {
                name: hostile.into(),
                time_s: 0.0,
                outcome: failed(hostile),
            }],
        };
        let xml = render(hostile, &[suite]);
        assert!(!xml.contains("<evil"), "{xml}");
        assert!(!xml.contains("]]>"), "{xml}");
        assert!(!xml.contains('\u{1}'), "{xml}");
        let want = "x&quot;/&gt;&lt;evil a=&apos;1&apos;&gt;&amp;amp;]]&gt;\u{fffd}&#10;";
        // The command, the suite's name and timestamp, the case's classname and name, the
        // failure's message, type is fixed, and its text.
        assert_eq!(xml.matches(want).count(), 7, "{xml}");
        // Every element opened is closed, in order: the markup is only ours.
        let opened = xml.matches("<testcase ").count();
        assert_eq!(opened, xml.matches("</testcase>").count());
        assert_eq!(xml.matches("<failure ").count(), 1);
    }
}
