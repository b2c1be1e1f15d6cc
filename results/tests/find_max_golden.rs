//! A find-max run's deterministic outputs, made from a fixed, scripted set of probe results
//! through the pure search (`results::search`): every probe the search asked for with its mark
//! (run.json's `steps[].probe`) and run.json's `capacity`, as `tests/golden/find-max.json`, byte
//! for byte. No timing enters: the scripted server answers by rate alone and the elapsed time is
//! the sum of the probes' lengths. Regenerate it with
//! `STAMPEDE_BLESS=1 cargo test -p results --test find_max_golden`.
mod golden_file;

use results::search::{Capacity, Ceiling, Class, Config, Failure, Next, Probed, Search, mark};

/// The scripted server: passes up to 1,234 req/s; above it p99 grows past the SLO p99<50ms.
fn server(rate: f64, measured_s: f64) -> Probed {
    const LIMIT: f64 = 1234.0;
    let class = if rate <= LIMIT {
        Class::Pass
    } else {
        let p99 = 50.0 + (rate - LIMIT) / 10.0;
        Class::Fail(Failure::Slo {
            slo: "p99<50ms".into(),
            value: p99,
            seen: format!("p99 {p99:.1} ms"),
        })
    };
    Probed {
        class,
        achieved: rate.min(LIMIT) * 0.998,
        measured_s,
        target_errors: false,
        evidence: None,
    }
}

fn find_max() -> serde_json::Value {
    let config = Config {
        start: 100.0,
        max_rate: 100_000.0,
        probe_s: 2.0,
        confirm_s: 6.0,
        ..Config::default()
    };
    let mut search = Search::new(config.clone()).expect("a valid search");
    let mut probes = Vec::new();
    let mut last = None;
    let mut elapsed = 0.0;
    let answer = loop {
        match search.next(last.take(), elapsed) {
            Next::Done(answer) => break answer,
            Next::Probe {
                rate,
                duration_s,
                role,
            } => {
                let p = server(rate, duration_s);
                probes.push(serde_json::json!({
                    "value": rate,
                    "duration_s": duration_s,
                    "probe": mark(role, &p.class),
                }));
                elapsed += duration_s;
                last = Some(p);
            }
        }
        assert!(probes.len() < 1000, "the search ends");
    };
    let ceiling = Ceiling {
        rate: config.max_rate,
        by: "--max-rate".into(),
        detail: None,
    };
    let capacity = Capacity::of(
        &answer,
        "requests",
        &["p99<50ms".into()],
        config.precision,
        ceiling,
        elapsed,
    );
    serde_json::json!({ "steps": probes, "capacity": capacity })
}

#[test]
fn a_scripted_find_max_run_leaves_the_golden_probes_and_capacity() {
    let fresh = serde_json::to_string_pretty(&find_max()).unwrap() + "\n";
    golden_file::check(
        "find-max.json",
        &fresh,
        "the scripted search",
        "find_max_golden",
    );
}
