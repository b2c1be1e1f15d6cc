//! stampede's coordinator: the CLI's commands as library functions that tests call in-process. `run`
//! drives agents step by step and writes the results; `serve` is the reference target; `demo` joins both.
pub mod certs;
pub mod cli;
pub mod compare;
pub mod config;
pub mod demo;
pub mod destination;
pub mod exit;
pub mod fleet;
pub mod history;
pub mod junit;
pub mod live;
pub mod merge;
pub mod output;
pub mod progress;
pub mod report_file;
pub mod run;
pub mod serve;
pub mod server_prom;
pub mod summary;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;

use crate::cli::Command;
use crate::run::Stop;

/// What a command ended with, as the process exit code: 0 all steps ran (or --stop-on ended the ramp),
/// 1 failed or aborted, 2 usage, 3 a --fail-on expression was breached. `stop.drain` is the first
/// Ctrl-C, `stop.now` the second (see [`Stop`]).
pub async fn execute(command: Command, stop: Stop) -> u8 {
    match command {
        Command::Run(args) => run_command(*args, stop).await,
        Command::Demo(args) => finish(demo::run(args, stop).await),
        Command::FindMax(args) => find_max(*args, stop).await,
        Command::Compare(args) => compared(args),
        Command::Summary(args) => match summary::markdown(&args.dirs) {
            Ok(text) => match print_out(&text) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("stampede: {e}");
                    1
                }
            },
            Err(e) => {
                eprintln!("stampede: {e}");
                2
            }
        },
        Command::History(args) => histories(args),
        Command::Certs(cmd) => {
            let made = match cmd {
                cli::CertsCommand::Init {
                    dir,
                    agents,
                    monitors,
                    coordinator,
                    days,
                    kubernetes,
                } => {
                    let fleet = certs::Fleet {
                        coordinator,
                        agents,
                        monitors,
                    };
                    if kubernetes {
                        return certs_for_kubernetes(&dir, &fleet, days);
                    }
                    certs::init(&dir, &fleet, days)
                }
                cli::CertsCommand::Issue {
                    dir,
                    name,
                    role,
                    file,
                    days,
                    backdate_days,
                } => {
                    let file = file.unwrap_or_else(|| certs::default_file(&name, role));
                    certs::issue_more(&dir, &name, &file, role, days, backdate_days)
                        .map(|f| vec![f])
                }
            };
            match made {
                Ok(files) => {
                    let list: String = files.iter().map(|f| format!("{}\n", f.display())).collect();
                    match print_out(&list) {
                        Ok(()) => 0,
                        Err(e) => {
                            eprintln!("stampede: {e}");
                            1
                        }
                    }
                }
                Err(e) => {
                    eprintln!("stampede: {e}");
                    1
                }
            }
        }
        Command::Report(args) => report(&args),
        Command::Serve(args) => {
            let durations = optional_duration("--delay", args.delay.as_deref()).and_then(|delay| {
                Ok((
                    delay.unwrap_or(Duration::ZERO),
                    optional_duration("--wedge-after", args.wedge_after.as_deref())?,
                ))
            });
            let (delay, wedge_after) = match durations {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("stampede: {e}");
                    return 2;
                }
            };
            let cfg = serve::ServeConfig {
                listen: args.listen,
                delay,
                capacity: args.capacity,
                wedge_after,
                body: Bytes::from(args.body.into_bytes()),
                tls: args.tls,
                max_streams: args.max_streams,
                ready_file: args.ready_file,
            };
            match serve::run(cfg, stop.drain).await {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("stampede: {e}");
                    match e {
                        serve::ServeError::Capacity(_)
                        | serve::ServeError::WedgeWithoutCapacity => 2,
                        serve::ServeError::Bind { .. }
                        | serve::ServeError::Tls(_)
                        | serve::ServeError::Ready(_) => 1,
                    }
                }
            }
        }
    }
}

/// `stampede run`: one target's run, or several side by side; the JUnit file after the outputs.
async fn run_command(args: cli::RunArgs, stop: Stop) -> u8 {
    let junit = match junit::Junit::named("stampede run", args.junit.as_deref()) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("stampede: {e}");
            return e.exit_code();
        }
    };
    match config::resolve_runs(args) {
        Ok(config::Runs::One(cfg)) => {
            say_notes(&cfg.notes);
            let mut outcome = run::run(*cfg, stop).await;
            let live = live_of(&mut outcome);
            let ended = junit::Ended::of_run(&outcome);
            let code = junit.write(ended, finish(outcome));
            keep_live(code, live).await
        }
        Ok(config::Runs::Side(side)) => {
            say_notes(side.runs.first().map_or(&[][..], |c| &c.notes));
            let mut outcome = run::run_side(side, stop).await;
            let live = side_live_of(&mut outcome);
            let ended = junit::Ended::of_side(&outcome);
            let code = junit.write(ended, finish_side(outcome));
            keep_live(code, live).await
        }
        Err(e) => {
            eprintln!("stampede: {e}");
            junit.write(junit::Ended::Failed(e.to_string()), 2)
        }
    }
}

/// The run's live page, taken out of its outcome so that it lingers (`--live-keep`) only after the
/// table and the answer are printed.
fn live_of(outcome: &mut Result<run::RunOutcome, run::RunError>) -> Option<live::Lingering> {
    outcome.as_mut().ok().and_then(|o| o.live.take())
}

fn side_live_of(outcome: &mut Result<run::SideOutcome, run::RunError>) -> Option<live::Lingering> {
    outcome
        .as_mut()
        .ok()
        .and_then(|o| o.runs.first_mut())
        .and_then(|o| o.live.take())
}

/// The exit code `code`, once the live page has had its `--live-keep`.
async fn keep_live(code: u8, live: Option<live::Lingering>) -> u8 {
    if let Some(live) = live {
        progress::flush();
        live.wait().await;
    }
    code
}

/// `stampede find-max`: one search, or one per target side by side.
async fn find_max(args: cli::FindMaxArgs, stop: Stop) -> u8 {
    let junit = match junit::Junit::named("stampede find-max", args.run.junit.as_deref()) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("stampede: {e}");
            return e.exit_code();
        }
    };
    let cfg = match config::resolve_find_max(args) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("stampede: {e}");
            return junit.write(junit::Ended::Failed(e.to_string()), 2);
        }
    };
    say_notes(&cfg.runs.first().notes);
    match cfg.runs {
        config::Runs::One(run) => {
            let mut outcome = run::find_max(*run, cfg.setup, stop).await;
            let live = live_of(&mut outcome);
            let ended = junit::Ended::of_run(&outcome);
            let code = junit.write(ended, found(outcome));
            keep_live(code, live).await
        }
        config::Runs::Side(side) => {
            let mut outcome = run::find_max_side(side, cfg.setup, stop).await;
            let live = side_live_of(&mut outcome);
            let ended = junit::Ended::of_side(&outcome);
            let code = junit.write(ended, found_side(outcome));
            keep_live(code, live).await
        }
    }
}

/// What the configuration says before the run: the other tools' habits accepted as no-ops.
fn say_notes(notes: &[String]) {
    for n in notes {
        eprintln!("stampede: {n}");
    }
}

/// A duration flag that may be left out.
fn optional_duration(
    flag: &'static str,
    value: Option<&str>,
) -> Result<Option<Duration>, config::ConfigError> {
    value.map(|v| config::parse_duration(flag, v)).transpose()
}

/// `stampede history`: the TSV (stdout unless --tsv), the page if asked; on stderr the step the
/// rows were read at, each run skipped and each file written. Each error is a line of its own.
fn histories(args: cli::HistoryArgs) -> u8 {
    let at = match args.at.as_deref().map(history::parse_at).transpose() {
        Ok(at) => at,
        Err(e) => {
            eprintln!("stampede: {e}");
            return e.exit_code();
        }
    };
    let skip_unreadable = args.skip_unreadable;
    let cfg = history::HistoryConfig {
        dirs: args.dirs,
        at,
        skip_unreadable,
        tsv: destination::Destination::of(&args.tsv),
        html: args.html.as_deref().map(destination::Destination::of),
    };
    match history::run(cfg) {
        Ok(o) => {
            for e in &o.skipped {
                eprintln!("stampede: skipped: {e}");
            }
            eprintln!(
                "stampede: {} run{}; {}",
                o.history.rows.len(),
                if o.history.rows.len() == 1 { "" } else { "s" },
                o.history.at.words()
            );
            if o.history.rows.iter().all(|r| r.at_step.is_none()) {
                eprintln!(
                    "stampede: no run offered a step at or below that rate: its p99 and requests per core-second are empty (a higher --at reads them)"
                );
            }
            for w in o.written.iter().filter(|d| !d.is_stdout()) {
                eprintln!("stampede: wrote {w}");
            }
            0
        }
        Err(errors) => {
            for e in &errors {
                eprintln!("stampede: {e}");
            }
            let unreadable = errors
                .iter()
                .any(|e| matches!(e, history::HistoryError::Read(_)));
            if unreadable && !skip_unreadable {
                eprintln!(
                    "stampede: nothing written; --skip-unreadable leaves out the run.json files that cannot be read"
                );
            }
            errors
                .iter()
                .map(history::HistoryError::exit_code)
                .max()
                .unwrap_or(2)
        }
    }
}

/// `stampede compare`: 0 compared, 1 a file not written, 2 bad input, 3 a regression under
/// --fail-on-regression or a breached --regression gate (said on stderr after every file is
/// written).
fn compared(args: cli::CompareArgs) -> u8 {
    let junit = match junit::Junit::named("stampede compare", args.junit.as_deref()) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("stampede: {e}");
            return e.exit_code();
        }
    };
    let (code, suite) = compare_verdicts(args);
    junit.write(junit::Ended::Compared(suite), code)
}

/// [`compared`]'s exit code, and its verdicts as a JUnit suite.
fn compare_verdicts(args: cli::CompareArgs) -> (u8, results::junit::Suite) {
    let failed = |code: u8, e: &dyn std::fmt::Display| {
        eprintln!("stampede: {e}");
        (
            code,
            results::junit::Suite::errored("compare", "compare", &e.to_string()),
        )
    };
    let threshold = match results::compare::Threshold::parse(&args.threshold) {
        Ok(t) => t,
        Err(e) => return failed(2, &e),
    };
    let gates = match args
        .regressions
        .iter()
        .map(|g| results::compare::Gate::parse(g))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(g) => g,
        Err(e) => return failed(2, &e),
    };
    let cfg = compare::CompareConfig {
        dirs: args.dirs,
        labels: args.labels,
        baseline: args.baseline,
        threshold,
        gates,
        html: destination::Destination::of(&args.output),
        tsv: args.tsv.as_deref().map(destination::Destination::of),
        json: args.json.as_deref().map(destination::Destination::of),
    };
    // A file on stdout owns it: the summary goes to stderr beside the progress.
    let summary_to_stderr = cfg.html.is_stdout()
        || [&cfg.tsv, &cfg.json]
            .iter()
            .any(|d| d.as_ref().is_some_and(destination::Destination::is_stdout));
    let outcome = match compare::run(cfg) {
        Ok(o) => o,
        Err(e) => return failed(e.exit_code(), &e),
    };
    let summary = compare::summary(&outcome);
    if summary_to_stderr {
        eprint!("{summary}");
    } else if let Err(e) = print_out(&summary) {
        return failed(1, &e);
    }
    let mut code = 0;
    let regressions = compare::regressions(&outcome.comparison);
    let regressed = !outcome.regressions().is_empty();
    if args.fail_on_regression && regressed {
        eprint!("stampede: --fail-on-regression: {regressions}");
        code = 3;
    }
    for g in outcome.gates_breached() {
        eprintln!("stampede: {}", g.sentence());
        code = 3;
    }
    let suite = results::junit::of_compare(
        &outcome.comparison.gates,
        args.fail_on_regression
            .then_some((regressed, regressions.as_str())),
    );
    (code, suite)
}

/// `stampede report`: the page rebuilt; where it went is said on stdout (a script's next argument).
/// A wrong directory or a damaged file is the user's to fix (2); an unwritable output fails (1).
fn report(args: &cli::ReportArgs) -> u8 {
    let fail = |code: u8, e: &dyn std::fmt::Display| {
        eprintln!("stampede: {e}");
        code
    };
    let html = match report_file::render(&args.dir) {
        Ok(html) => html,
        Err(e) => return fail(2, &e),
    };
    // A path the user named is written through; the directory's own report.html is replaced
    // atomically, like the run's other files.
    let said = match args.output.as_deref().map(destination::Destination::of) {
        Some(destination::Destination::Stdout) => print_out(&html),
        Some(to) => match to.write("-o", &html) {
            Ok(()) => print_out(&format!("{to}\n")),
            Err(e) => return fail(e.exit_code(), &e),
        },
        None => {
            let path = args.dir.join(report_file::REPORT);
            match output::write_file(&path, &html) {
                Ok(()) => print_out(&format!("{}\n", path.display())),
                Err(e) => return fail(1, &e),
            }
        }
    };
    // Beside the report by default: the live page, from the run's events alone.
    if args.output.is_none() {
        match report_file::render_live(&args.dir) {
            Ok(None) => {}
            Ok(Some(page)) => {
                let path = args.dir.join(live::PAGE_FILE);
                if let Err(e) = output::write_file(&path, &page) {
                    return fail(1, &e);
                }
                if let Err(e) = print_out(&format!("{}\n", path.display())) {
                    return fail(1, &e);
                }
            }
            Err(e) => return fail(2, &e),
        }
    }
    match said {
        Ok(()) => 0,
        Err(e) => fail(1, &e),
    }
}

/// `stampede certs init --kubernetes`: the Secret manifests on stdout (for `kubectl apply -f -`), the
/// files written on stderr; a wrong number of agents is a usage error.
fn certs_for_kubernetes(dir: &Path, fleet: &certs::Fleet, days: i64) -> u8 {
    match certs::init_for_kubernetes(dir, fleet, days) {
        Ok((files, yaml)) => {
            for f in files {
                eprintln!("{}", f.display());
            }
            match print_out(&yaml) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("stampede: {e}");
                    1
                }
            }
        }
        Err(e) => {
            eprintln!("stampede: {e}");
            if matches!(e, certs::CertsError::KubernetesAgents(_)) {
                2
            } else {
                1
            }
        }
    }
}

/// Writes to stdout, as an error instead of `print!`'s panic when it cannot be written
/// (`> /dev/full`, a closed pipe).
fn print_out(text: &str) -> Result<(), StdoutError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(StdoutError)
}

#[derive(Debug, thiserror::Error)]
#[error("cannot write to stdout: {0}")]
struct StdoutError(std::io::Error);

fn finish(outcome: Result<run::RunOutcome, run::RunError>) -> u8 {
    // What the run said on stderr as it went comes before its end.
    progress::flush();
    match outcome {
        Ok(o) => {
            let text = told(&o, "");
            let report = o.dir.join(report_file::REPORT);
            let text = format!(
                "{text}results: {}\nreport: {}\n",
                o.dir.display(),
                report.display()
            );
            if let Err(e) = print_out(&text) {
                eprintln!("stampede: {e}; the results are in {}", o.dir.display());
                return 1;
            }
            exit_code(std::slice::from_ref(&o))
        }
        Err(e) => {
            eprintln!("stampede: {e}");
            e.exit_code()
        }
    }
}

/// A search's end: its probes' table, the answer, where the results are; the exit code is the
/// search's status (see `results::search::Status::exit_code`).
fn found(outcome: Result<run::RunOutcome, run::RunError>) -> u8 {
    // What the run said on stderr as it went comes before its end.
    progress::flush();
    let o = match outcome {
        Ok(o) => o,
        Err(e) => {
            eprintln!("stampede: {e}");
            return e.exit_code();
        }
    };
    let mut text = progress::table(&o.steps);
    if let Some(c) = &o.capacity {
        text.push_str(&capacity_lines(c, ""));
    }
    let report = o.dir.join(report_file::REPORT);
    text.push_str(&format!(
        "results: {}\nreport: {}\n",
        o.dir.display(),
        report.display()
    ));
    if let Err(e) = print_out(&text) {
        eprintln!("stampede: {e}; the results are in {}", o.dir.display());
        return 1;
    }
    match &o.capacity {
        Some(c) => c.exit_code,
        None => 1,
    }
}

/// Searches side by side, at their end: each target's probes and capacity under its label, where
/// the results and the comparison are, and the targets ranked by the rate each sustained. The exit
/// code is the worst target's (see [`worst_search`]).
fn found_side(outcome: Result<run::SideOutcome, run::RunError>) -> u8 {
    side_end(
        outcome,
        |o, whose| {
            let mut text = progress::table(&o.steps);
            if let Some(c) = &o.capacity {
                text.push_str(&capacity_lines(c, whose));
            }
            text
        },
        |side| match &side.compared {
            Ok(c) => compare::ranking(c),
            // No comparison to rank with: the searches' answers in one line, as found.
            Err(_) => {
                let ranked: Vec<(&str, &results::search::Capacity)> = side
                    .runs
                    .iter()
                    .filter_map(|o| {
                        Some((o.label.as_deref().unwrap_or_default(), o.capacity.as_ref()?))
                    })
                    .collect();
                results::search::capacity::ranking(&ranked) + "\n"
            }
        },
        |runs| {
            let codes: Vec<u8> = runs
                .iter()
                .map(|o| o.capacity.as_ref().map_or(1, |c| c.exit_code))
                .collect();
            worst_search(&codes)
        },
    )
}

/// The end of several targets side by side, runs and searches alike: `each` target's block under
/// its label (`whose` is " (LABEL)"), where the comparison and the results are, the `ranking`, and
/// the worst target's `exit` code (1 when the comparison could not be written).
fn side_end(
    outcome: Result<run::SideOutcome, run::RunError>,
    each: impl Fn(&run::RunOutcome, &str) -> String,
    ranking: impl Fn(&run::SideOutcome) -> String,
    exit: impl Fn(&[run::RunOutcome]) -> u8,
) -> u8 {
    // What the run said on stderr as it went comes before its end.
    progress::flush();
    let side = match outcome {
        Ok(side) => side,
        Err(e) => {
            eprintln!("stampede: {e}");
            return e.exit_code();
        }
    };
    let mut text = String::new();
    for o in &side.runs {
        let label = o.label.as_deref().unwrap_or_default();
        text.push_str(&format!("== {label} ({}) ==\n", o.dir.display()));
        text.push_str(&each(o, &format!(" ({label})")));
    }
    let compare = side.dir.join(output::BESIDE_FILES[0]);
    match &side.compared {
        Ok(_) => text.push_str(&format!("compare: {}\n", compare.display())),
        Err(e) => eprintln!("stampede: {e}"),
    }
    text.push_str(&format!("results: {}\n", side.dir.display()));
    text.push_str(&ranking(&side));
    if let Err(e) = print_out(&text) {
        eprintln!("stampede: {e}; the results are in {}", side.dir.display());
        return 1;
    }
    match exit(&side.runs) {
        0 if side.compared.is_err() => 1,
        code => code,
    }
}

/// The exit code of several searches: the worst one's, worst meaning furthest from an answer to
/// trust. 1 (a search failed or was interrupted: no answer) before 6 (doomed: even the start
/// failed), 7 (server_unrecovered), 5 (generator_bound: the generator, not the server, was
/// measured), 8 (deadline: bounds not narrowed), 4 (lower_bound_only: a pass at the ceiling), and
/// 0 only when every search resolved.
fn worst_search(codes: &[u8]) -> u8 {
    const WORST_FIRST: [u8; 7] = [1, 6, 7, 5, 8, 4, 0];
    let rank = |c: &u8| WORST_FIRST.iter().position(|w| w == c).unwrap_or(0);
    codes.iter().copied().min_by_key(rank).unwrap_or(1)
}

/// A search's capacity and status, as stdout ends with them (`whose` after "capacity").
fn capacity_lines(c: &results::search::Capacity, whose: &str) -> String {
    let n = c.probes.total();
    format!(
        "capacity{whose}: {} ({n} probe{} in {})\nstatus{whose}: {} (exit {})\n",
        c.answer,
        if n == 1 { "" } else { "s" },
        progress::span(Duration::from_secs_f64(c.elapsed_s)),
        c.status.name(),
        c.exit_code
    )
}

/// A side-by-side run's end: each target's table and answer under its label, where the results and
/// the comparison are, then the ranking of the targets; the exit code is the worst of the targets'.
fn finish_side(outcome: Result<run::SideOutcome, run::RunError>) -> u8 {
    // The end: one table of the targets, best first, instead of an answer per target to set side
    // by side by hand.
    side_end(
        outcome,
        told,
        |side| {
            side.compared
                .as_ref()
                .map_or(String::new(), compare::ranking)
        },
        exit_code,
    )
}

/// One run's table, why --stop-on ended it, and its answer (`whose` after "answer"), for stdout.
fn told(o: &run::RunOutcome, whose: &str) -> String {
    let mut text = progress::table_after(o.warmup.as_ref(), &o.steps, &o.repeats);
    if let Some(s) = &o.stopped {
        let not_run: Vec<String> = s.not_run.iter().map(f64::to_string).collect();
        text.push_str(&format!(
            "stopped after step {} (--stop-on): {}; not run: {}\n",
            s.after_step,
            s.because,
            not_run.join(", ")
        ));
    }
    // The headline: the answer at a glance; every number behind it is in run.json's summary.
    text.push_str(&format!(
        "answer{whose}: {}\n",
        results::step::summarize_run(&o.steps).headline
    ));
    text
}

/// After the outputs are written: the --fail-on breaches on stderr, and the exit code of the runs
/// together (1 if any was aborted, else 3 if any breached, else 0).
fn exit_code(runs: &[run::RunOutcome]) -> u8 {
    // Printed after the outputs are written, so CI keeps them whatever the exit code.
    for o in runs {
        let whose = o
            .label
            .as_deref()
            .map_or(String::new(), |l| format!("{l}: "));
        for b in &o.breaches {
            eprintln!("stampede: {whose}{}", b.sentence());
        }
    }
    if let Some(o) = runs.iter().find(|o| o.aborted) {
        let dir = match runs {
            [_] => o.dir.clone(),
            _ => o.dir.parent().map_or(o.dir.clone(), Path::to_path_buf),
        };
        eprintln!(
            "stampede: run aborted; finished steps are in {}",
            dir.display()
        );
        1
    } else if runs.iter().any(|o| !o.breaches.is_empty()) {
        3
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_searches_exit_with_the_worst_one_s_code() {
        assert_eq!(worst_search(&[0, 0]), 0);
        assert_eq!(worst_search(&[0, 4]), 4);
        assert_eq!(worst_search(&[4, 8, 0]), 8);
        assert_eq!(worst_search(&[8, 5]), 5);
        assert_eq!(worst_search(&[5, 7, 0]), 7);
        assert_eq!(worst_search(&[7, 6]), 6);
        assert_eq!(worst_search(&[6, 1, 0]), 1);
        // Every search's exit code has its place in the order.
        for code in [0, 1, 4, 5, 6, 7, 8] {
            assert_eq!(worst_search(&[code, 0]), code);
        }
    }
}
