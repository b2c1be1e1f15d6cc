//! The capacity search driven against simulated servers (monotone, noisy, broken, generator-starved):
//! every ending it can reach, and properties of its bounds over any monotone limit.

use proptest::prelude::*;

use super::*;
use crate::condition::{Condition, Observed, parse};

fn config() -> Config {
    Config {
        start: 100.0,
        max_rate: 100_000.0,
        probe_s: 2.0,
        confirm_s: 6.0,
        ..Config::default()
    }
}

fn outcome(class: Class, rate: f64, duration_s: f64, target_errors: bool) -> Probed {
    Probed {
        class,
        achieved: rate,
        measured_s: duration_s,
        target_errors,
        evidence: None,
    }
}

/// Runs a search to its end against `server` (rate, role, probe number -> outcome); every probe
/// it asked for, and the answer.
fn drive(
    config: Config,
    mut server: impl FnMut(f64, f64, ProbeRole, usize) -> Probed,
) -> (Vec<(f64, ProbeRole, Class, f64)>, Answer) {
    drive_with(config, |_, rate, d, role, n| server(rate, d, role, n))
}

/// [`drive`], with the search at hand for a server that classifies through it.
fn drive_with(
    config: Config,
    mut server: impl FnMut(&Search, f64, f64, ProbeRole, usize) -> Probed,
) -> (Vec<(f64, ProbeRole, Class, f64)>, Answer) {
    let mut search = Search::new(config).unwrap();
    let mut probes = Vec::new();
    let mut last = None;
    let mut elapsed = 0.0;
    loop {
        match search.next(last.take(), elapsed) {
            Next::Done(answer) => return (probes, answer),
            Next::Probe {
                rate,
                duration_s,
                role,
            } => {
                let p = server(&search, rate, duration_s, role, probes.len());
                probes.push((rate, role, p.class.clone(), duration_s));
                elapsed += duration_s;
                last = Some(p);
            }
        }
        assert!(probes.len() < 10_000, "the search does not end");
    }
}

fn monotone(limit: f64) -> impl FnMut(f64, f64, ProbeRole, usize) -> Probed {
    move |rate, d, _, _| {
        let class = if rate <= limit {
            Class::Pass
        } else {
            Class::Fail(Failure::Shortfall {
                achieved: limit,
                offered: rate,
            })
        };
        outcome(class, rate.min(limit), d, false)
    }
}

#[test]
fn a_monotone_server_is_found_within_precision_and_both_bounds_confirmed() {
    let (probes, a) = drive(config(), monotone(1234.0));
    assert_eq!(a.status, Status::Resolved);
    let max = a.max_rate.unwrap().offered;
    let fail = a.lowest_fail.as_ref().unwrap().offered;
    assert!(
        max <= 1234.0 && fail > 1234.0 && fail / max <= 1.05,
        "{a:?}"
    );
    assert_eq!(a.confirmations, 2);
    assert_eq!(a.probes.confirm, 4);
    assert_eq!(a.probes.total() as usize, probes.len());
    // Ramp doubles from the start: 100, 200, ..., 1600 fails.
    let ramp: Vec<f64> = probes
        .iter()
        .filter(|p| p.1 == ProbeRole::Ramp)
        .map(|p| p.0)
        .collect();
    assert_eq!(ramp, [100.0, 200.0, 400.0, 800.0, 1600.0]);
}

#[test]
fn a_fail_at_the_start_is_doomed() {
    let (probes, a) = drive(config(), monotone(50.0));
    assert_eq!(a.status, Status::Doomed);
    assert_eq!(a.status.exit_code(), 6);
    assert_eq!(probes.len(), 1);
    assert!(a.max_rate.is_none());
    assert_eq!(a.lowest_fail.unwrap().offered, 100.0);
}

#[test]
fn a_pass_at_the_max_rate_is_a_lower_bound_only() {
    let c = Config {
        max_rate: 1000.0,
        ..config()
    };
    let (probes, a) = drive(c, monotone(5000.0));
    assert_eq!(a.status, Status::LowerBoundOnly);
    assert_eq!(a.max_rate.unwrap().offered, 1000.0);
    assert!(a.lowest_fail.is_none());
    assert_eq!(probes.last().unwrap().0, 1000.0);
}

#[test]
fn an_untrusted_generator_ends_generator_bound_at_least_the_last_pass() {
    // Passes up to 400; at 800 the generator cannot keep up, however often it tries.
    let (probes, a) = drive(config(), |rate, d, _, _| {
        let class = if rate <= 400.0 {
            Class::Pass
        } else {
            Class::Invalid
        };
        outcome(class, rate, d, false)
    });
    assert_eq!(a.status, Status::GeneratorBound);
    assert_eq!(a.max_rate.unwrap().offered, 400.0);
    assert!(a.lowest_fail.is_none(), "an invalid probe is no bound");
    assert_eq!(a.probes.invalid, 3);
    assert!(probes.iter().rev().take(3).all(|p| p.0 == 800.0));
}

#[test]
fn a_server_that_does_not_come_back_is_unrecovered() {
    // Above 1000 it times out, and from then on it answers nothing.
    let mut broken = false;
    let (probes, a) = drive(config(), |rate, d, _, _| {
        broken |= rate > 1000.0;
        if broken {
            outcome(Class::Fail(Failure::Undecided), 0.0, d, true)
        } else {
            outcome(Class::Pass, rate, d, false)
        }
    });
    assert_eq!(a.status, Status::ServerUnrecovered);
    assert_eq!(a.max_rate.unwrap().offered, 800.0);
    let last = probes.last().unwrap();
    assert_eq!((last.0, last.1), (800.0, ProbeRole::Recovery));
}

#[test]
fn a_server_that_recovers_is_bisected_after_the_check() {
    let (probes, a) = drive(config(), |rate, d, _, _| {
        if rate <= 1000.0 {
            outcome(Class::Pass, rate, d, false)
        } else {
            let f = Failure::Slo {
                slo: "failed<1%".into(),
                value: 30.0,
                seen: "failed 30%".into(),
            };
            outcome(Class::Fail(f), rate, d, true)
        }
    });
    assert_eq!(a.status, Status::Resolved);
    assert!(probes.iter().any(|p| p.1 == ProbeRole::Recovery));
    assert!(probes.iter().any(|p| p.1 == ProbeRole::Bisect));
    assert!(matches!(
        a.lowest_fail.unwrap().failure,
        Failure::Slo { value, .. } if value == 30.0
    ));
}

#[test]
fn undecided_probes_run_longer_then_count_as_fails() {
    let (probes, a) = drive(config(), |rate, d, _, _| {
        let class = if rate <= 400.0 {
            Class::Pass
        } else {
            Class::Undecided
        };
        outcome(class, rate, d, false)
    });
    let at_800: Vec<_> = probes.iter().filter(|p| p.0 == 800.0).collect();
    assert_eq!(at_800.len(), 3, "once, then twice longer");
    let durations: Vec<f64> = at_800.iter().map(|p| p.3).collect();
    assert_eq!(durations, [2.0, 4.0, 8.0]);
    assert!(a.probes.undecided >= 3);
    let fail = a.lowest_fail.unwrap();
    assert!(fail.offered <= 800.0);
    assert_eq!(a.status, Status::Resolved);
}

#[test]
fn a_low_bound_that_fails_its_confirmations_is_given_up_and_the_search_goes_on() {
    // Short probes pass up to 1000, but held for a confirmation's length nothing above 900 does.
    let (probes, a) = drive(config(), |rate, d, role, _| {
        let pass = rate <= 900.0 || (rate <= 1000.0 && role != ProbeRole::Confirm);
        let class = if pass {
            Class::Pass
        } else {
            Class::Fail(Failure::Undecided)
        };
        outcome(class, rate, d, false)
    });
    assert_eq!(a.status, Status::Resolved);
    let max = a.max_rate.unwrap().offered;
    let fail = a.lowest_fail.unwrap().offered;
    assert!(max <= 900.0 && fail / max <= 1.05, "max {max}, fail {fail}");
    let refuted = probes
        .iter()
        .filter(|p| p.1 == ProbeRole::Confirm && p.2 != Class::Pass)
        .count();
    assert!(
        refuted >= 2,
        "the first low bound was confirmed and refuted"
    );
    assert_eq!(a.confirmations, 2);
}

#[test]
fn the_deadline_ends_with_the_bounds_known() {
    let c = Config {
        deadline_s: 9.0,
        ..config()
    };
    let (probes, a) = drive(c, monotone(1234.0));
    assert_eq!(a.status, Status::Deadline);
    assert_eq!(
        probes.len(),
        4,
        "four 2 s probes fit in 9 s, a fifth does not"
    );
    assert_eq!(a.max_rate.unwrap().offered, 800.0);
}

/// Runs a search whose probes are classified by the search itself from the facts `server` gives
/// for (rate, seconds): the classification and the search together, as the coordinator runs them.
fn drive_classified(
    config: Config,
    slos: &[Condition],
    mut server: impl FnMut(f64, f64) -> ProbeFacts,
) -> (Vec<(f64, ProbeRole, Class, f64)>, Answer) {
    drive_with(config, |search, rate, d, _, _| {
        let facts = server(rate, d);
        Probed::of(search.classify(&facts, slos), &facts, d, slos)
    })
}

/// A probe's facts: `achieved` served per second for `seconds`, every latency `p99_ms` but the
/// median's 1 ms; `offered` none for the closed model.
fn facts(offered: Option<f64>, achieved: f64, seconds: f64, p99_ms: f64) -> ProbeFacts {
    ProbeFacts {
        offered,
        achieved,
        generator_bound: false,
        lag_p99_ms: 0.0,
        samples: (achieved * seconds) as u64,
        due: (offered.unwrap_or(achieved) * seconds) as u64,
        observed: Observed {
            latency_ms: Some([1.0, p99_ms, p99_ms, p99_ms, p99_ms, p99_ms]),
            latency_lower_bound: [false; 6],
            failed_pct: 0.0,
            errors_pct: 0.0,
            ok_rate: achieved,
            demanded_rate: offered,
            ..Default::default()
        },
    }
}

#[test]
fn a_latency_fail_does_not_make_every_rate_below_it_collapse() {
    // It serves whatever it is offered, but above 1234 req/s its p99 is over the SLO. The rates
    // bisected below the ramp's fail serve less than that fail did only because less is offered.
    // 10 s at the start's 100 req/s: the 1000 samples a p99 needs.
    let c = Config {
        probe_s: 10.0,
        ..config()
    };
    let slos = [parse("p99<50ms").unwrap()];
    let (probes, a) = drive_classified(c, &slos, |rate, d| {
        facts(Some(rate), rate, d, if rate > 1234.0 { 80.0 } else { 5.0 })
    });
    assert_eq!(a.status, Status::Resolved, "{probes:?}");
    let max = a.max_rate.unwrap().offered;
    let fail = a.lowest_fail.unwrap();
    assert!(max <= 1234.0 && fail.offered > 1234.0 && fail.offered / max <= 1.05);
    assert!(matches!(fail.failure, Failure::Slo { value, .. } if value == 80.0));
    assert!(
        !probes
            .iter()
            .any(|p| matches!(p.2, Class::Fail(Failure::Collapse { .. })))
    );
}

#[test]
fn a_target_that_refuses_from_the_start_is_doomed_not_generator_bound() {
    let slos = [parse("p99<50ms").unwrap()];
    let (probes, a) = drive_classified(config(), &slos, |rate, d| {
        let mut f = facts(Some(rate), 0.0, d, 5.0);
        (f.observed.latency_ms, f.observed.errors_pct) = (None, 100.0);
        f
    });
    assert_eq!(a.status, Status::Doomed, "{probes:?}");
    assert_eq!((a.probes.invalid, probes.len()), (0, 1));
}

#[test]
fn serving_less_as_the_load_grows_is_a_collapse() {
    // The closed model has no offered rate to fall short of: 100 connections serve 1000/s, 200
    // serve 850/s, below 90 % of what fewer connections served.
    let (probes, _) = drive_classified(config(), &[], |rate, d| {
        facts(None, if rate <= 100.0 { 1000.0 } else { 850.0 }, d, 5.0)
    });
    assert_eq!(probes[0].2, Class::Pass);
    assert!(matches!(
        probes[1].2,
        Class::Fail(Failure::Collapse { achieved, best }) if achieved == 850.0 && best == 1000.0
    ));
}

#[test]
fn a_probe_that_served_too_little_fails_without_the_tail_evidence() {
    // 500 samples cannot judge a p99 (1000 needed), but 80 of 100 req/s served is a fail already.
    let slos = [parse("p99<50ms").unwrap()];
    let short = facts(Some(100.0), 80.0, 6.25, 5.0);
    assert_eq!(short.samples, 500);
    assert!(matches!(
        classify(&short, &slos, None),
        Class::Fail(Failure::Shortfall { .. })
    ));
    let kept_up = facts(Some(100.0), 100.0, 5.0, 5.0);
    assert_eq!(classify(&kept_up, &slos, None), Class::Undecided);
}

fn record(offered: f64, measured_s: f64, pass: bool, role: ProbeRole) -> Record {
    Record {
        offered,
        achieved: offered,
        measured_s,
        failure: (!pass).then_some(Failure::Undecided),
        role,
    }
}

#[test]
fn a_rate_passes_by_the_majority_of_its_seconds_and_a_tie_fails() {
    let ramp = |rate, pass| record(rate, 10.0, pass, ProbeRole::Ramp);
    let confirm = |rate, pass| record(rate, 30.0, pass, ProbeRole::Confirm);
    // 200: a 10 s fail against a 30 s pass passes; 400: 30 s each way fails.
    let records = [
        ramp(100.0, true),
        ramp(200.0, false),
        confirm(200.0, true),
        confirm(400.0, true),
        confirm(400.0, false),
    ];
    assert_eq!(bounds(&records), (Some(200.0), Some(400.0)));
}

#[test]
fn a_pass_above_a_fail_is_noise_and_a_recovery_probe_no_bound() {
    let ramp = |rate, pass| record(rate, 10.0, pass, ProbeRole::Ramp);
    let records = [
        ramp(100.0, true),
        ramp(200.0, false),
        ramp(400.0, true),
        record(100.0, 10.0, false, ProbeRole::Recovery),
    ];
    assert_eq!(bounds(&records), (Some(100.0), Some(200.0)));
}

#[test]
fn a_bad_configuration_is_an_error_not_a_panic() {
    for c in [
        Config {
            start: 0.0,
            ..config()
        },
        Config {
            max_rate: 10.0,
            ..config()
        },
        Config {
            precision: f64::NAN,
            ..config()
        },
        Config {
            growth: 1.0,
            ..config()
        },
        Config {
            probe_s: -1.0,
            ..config()
        },
        Config {
            max_probes: 0,
            ..config()
        },
        Config {
            deadline_s: f64::NAN,
            ..config()
        },
    ] {
        assert!(Search::new(c).is_err());
    }
}

/// A server that passes iff the rate is at most its limit, except that each probe's outcome is
/// flipped with the given chance (decided by the seed, so a failure replays).
fn noisy(limit: f64, flip: f64, seed: u64) -> impl FnMut(f64, f64, ProbeRole, usize) -> Probed {
    let mut rng = shared::rng::Rng::new(seed);
    move |rate, d, _, _| {
        let pass = (rate <= limit) != (rng.next_f64() < flip);
        let class = if pass {
            Class::Pass
        } else {
            Class::Fail(Failure::Undecided)
        };
        outcome(class, rate, d, false)
    }
}

proptest! {
    #[test]
    fn it_converges_within_precision_of_any_monotone_limit(
        limit in 100.0f64..90_000.0,
        precision in 0.01f64..0.2,
        growth in 1.5f64..4.0,
    ) {
        let c = Config { precision, growth, ..config() };
        let (probes, a) = drive(c.clone(), monotone(limit));
        prop_assert_eq!(a.status, Status::Resolved);
        let max = a.max_rate.unwrap().offered;
        let fail = a.lowest_fail.unwrap().offered;
        prop_assert!(max <= limit && limit < fail);
        prop_assert!(fail / max <= 1.0 + precision + 1e-9);
        prop_assert!(probes.len() as u32 <= c.max_probes);
    }

    #[test]
    fn with_noise_it_never_reports_a_maximum_above_a_rate_that_failed_confirmation(
        limit in 100.0f64..90_000.0,
        flip in 0.0f64..0.3,
        seed in any::<u64>(),
    ) {
        let c = config();
        let (probes, a) = drive(c.clone(), noisy(limit, flip, seed));
        prop_assert!(probes.len() as u32 <= c.max_probes);
        if let Some(max) = a.max_rate {
            // Each confirmed rate's verdict by the majority of its measured seconds.
            let mut rates: Vec<f64> = probes.iter().filter(|p| p.1 == ProbeRole::Confirm).map(|p| p.0).collect();
            rates.dedup();
            for rate in rates {
                let seconds = |pass: bool| probes.iter()
                    .filter(|p| p.0 == rate && (p.2 == Class::Pass) == pass)
                    .map(|p| if p.1 == ProbeRole::Confirm { c.confirm_s } else { c.probe_s })
                    .sum::<f64>();
                if seconds(false) >= seconds(true) {
                    prop_assert!(max.offered < rate, "max {} above {} which failed confirmation", max.offered, rate);
                }
            }
        }
    }

    #[test]
    fn it_never_ends_on_an_invalid_probe_unless_the_generator_is_the_limit(
        limit in 100.0f64..90_000.0,
        invalid in 0.0f64..0.6,
        seed in any::<u64>(),
    ) {
        let mut rng = shared::rng::Rng::new(seed);
        let mut server = monotone(limit);
        let (probes, a) = drive(config(), |rate, d, role, n| {
            if rng.next_f64() < invalid {
                outcome(Class::Invalid, rate, d, false)
            } else {
                server(rate, d, role, n)
            }
        });
        let ended_invalid = probes.last().is_some_and(|p| p.2 == Class::Invalid);
        prop_assert_eq!(ended_invalid, a.status == Status::GeneratorBound);
        if let Some(max) = a.max_rate {
            prop_assert!(max.offered <= limit, "an invalid probe was taken for a pass");
        }
        if let Some(fail) = a.lowest_fail {
            prop_assert!(fail.offered > limit, "an invalid probe was taken for a fail");
        }
    }
}

#[test]
fn an_undecided_probe_short_of_samples_is_run_again_long_enough_to_gather_them() {
    let slos = vec![crate::condition::parse("p99<50ms").unwrap()];
    let mut search = Search::new(config()).unwrap();
    let Next::Probe {
        rate, duration_s, ..
    } = search.next(None, 0.0)
    else {
        panic!("a first probe")
    };
    assert_eq!((rate, duration_s), (100.0, 2.0));
    // 100/s for 2 s: 200 of the 1,000 samples a p99 needs.
    let facts = ProbeFacts {
        offered: Some(100.0),
        achieved: 100.0,
        generator_bound: false,
        lag_p99_ms: 0.0,
        samples: 200,
        due: 200,
        observed: crate::condition::Observed {
            latency_ms: Some([1.0, 2.0, 3.0, 3.0, 3.0, 1.0]),
            latency_lower_bound: [false; 6],
            failed_pct: 0.0,
            errors_pct: 0.0,
            ok_rate: 100.0,
            demanded_rate: Some(100.0),
            ..Default::default()
        },
    };
    let class = search.classify(&facts, &slos);
    assert_eq!(class, Class::Undecided);
    let probed = Probed::of(class, &facts, 2.0, &slos);
    assert_eq!(probed.evidence, Some(0.2));
    let Next::Probe {
        rate, duration_s, ..
    } = search.next(Some(probed), 2.0)
    else {
        panic!("a longer probe")
    };
    // 1.25 / 0.2 = 6.25 times as long: 1,250 samples at 100/s.
    assert_eq!((rate, duration_s), (100.0, 12.5));
}

#[test]
fn an_open_model_probe_lasts_long_enough_for_the_samples_its_slos_need() {
    let mut search = Search::new(Config {
        samples: 1000,
        ..config()
    })
    .unwrap();
    // 1,000 samples (and a quarter more) at 100/s: 12.5 s, not the 2 s asked for.
    assert!(matches!(
        search.next(None, 0.0),
        Next::Probe { rate, duration_s, .. } if rate == 100.0 && duration_s == 12.5
    ));
    let passed = outcome(Class::Pass, 100.0, 12.5, false);
    // At 200/s 6.25 s; at 1,000/s and above the 2 s hold.
    assert!(matches!(
        search.next(Some(passed), 12.5),
        Next::Probe { rate, duration_s, .. } if rate == 200.0 && duration_s == 6.25
    ));
    let closed = Config {
        samples: 1000,
        per_second: false,
        ..config()
    };
    assert_eq!(
        closed.length(100.0, 2.0),
        2.0,
        "a connection count sets no length"
    );
    assert_eq!(config().length(10.0, 2.0), 2.0, "no SLO needs samples");
}

#[test]
fn connection_counts_are_probed_whole_and_bisected_until_no_whole_count_lies_between() {
    let whole = Config {
        start: 2.0,
        whole: true,
        per_second: false,
        precision: 0.001,
        ..config()
    };
    let (probes, a) = drive(whole, monotone(49.4));
    assert_eq!(a.status, Status::Resolved);
    assert!(probes.iter().all(|p| p.0.fract() == 0.0), "{probes:?}");
    let (max, fail) = (a.max_rate.unwrap().offered, a.lowest_fail.unwrap().offered);
    assert_eq!(
        (max, fail),
        (49.0, 50.0),
        "no count between them, whatever --precision"
    );
}

#[test]
fn whole_counts_refuse_a_fraction_given_and_floor_a_ceiling_found() {
    let whole = |start: f64, max_rate: f64| Config {
        start,
        max_rate,
        whole: true,
        per_second: false,
        ..config()
    };
    assert!(matches!(
        whole(32.0, 50.5).validate(),
        Err(SearchConfigError::Whole { .. })
    ));
    // A ceiling the fleet took (50.5) is floored: the search never offers half a connection.
    let (probes, a) = drive(
        Config {
            max_rate: 50.5,
            ..whole(32.0, 64.0)
        },
        monotone(1000.0),
    );
    assert_eq!(a.status, Status::LowerBoundOnly);
    assert_eq!(a.max_rate.unwrap().offered, 50.0);
    assert!(probes.iter().all(|p| p.0.fract() == 0.0), "{probes:?}");
}

#[test]
fn an_undecided_retry_grows_at_most_eight_times() {
    let mut search = Search::new(Config {
        per_second: false,
        ..config()
    })
    .unwrap();
    let Next::Probe { duration_s, .. } = search.next(None, 0.0) else {
        panic!("a first probe")
    };
    let almost_nothing = Probed {
        evidence: Some(0.001),
        ..outcome(Class::Undecided, 100.0, duration_s, false)
    };
    let Next::Probe {
        duration_s: next, ..
    } = search.next(Some(almost_nothing), duration_s)
    else {
        panic!("a longer probe")
    };
    assert_eq!(next, duration_s * 8.0);
}

/// Ctrl-C can land after a probe ended and before the search was asked for the next one: the
/// probe's pass is one of the bounds all the same (it once was lost, and the answer fell back a
/// rate).
#[test]
fn a_search_stopped_before_it_took_the_last_probe_keeps_that_probe() {
    let mut search = Search::new(config()).unwrap();
    let mut last = None;
    let mut rates = Vec::new();
    for _ in 0..2 {
        let Next::Probe {
            rate, duration_s, ..
        } = search.next(last.take(), 0.0)
        else {
            panic!("the search ended before its second probe");
        };
        rates.push(rate);
        last = Some(outcome(Class::Pass, rate, duration_s, false));
    }
    let answer = search.stop(last, Status::Interrupted);
    assert_eq!(answer.status, Status::Interrupted);
    assert_eq!(answer.probes.ramp, 2);
    assert_eq!(answer.max_rate.map(|m| m.offered), Some(rates[1]));
    assert!(rates[1] > rates[0]);
}

/// Stopped with a probe asked for and never run, the search's bounds are those of the probes run.
#[test]
fn a_search_stopped_with_no_result_pending_answers_from_the_probes_run() {
    let mut search = Search::new(config()).unwrap();
    let Next::Probe {
        rate, duration_s, ..
    } = search.next(None, 0.0)
    else {
        panic!("no first probe");
    };
    let Next::Probe { .. } = search.next(Some(outcome(Class::Pass, rate, duration_s, false)), 0.0)
    else {
        panic!("no second probe");
    };
    search.forget_pending();
    let answer = search.stop(None, Status::Interrupted);
    assert_eq!(answer.probes.ramp, 1);
    assert_eq!(answer.max_rate.map(|m| m.offered), Some(rate));
}
