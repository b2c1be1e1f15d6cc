//! Durations as every flag and plan key writes them ("10s", "500ms", "2m", bare seconds), each
//! refusal naming its setting, none past a year.
use std::time::Duration;

use shared::plan::PlanError;

use super::ConfigError;
use crate::cli::DurationText;

/// The longest duration any flag or plan key takes: a year is beyond every step, run, timeout and
/// wait a load test has, and far below what overflows a clock (`Instant + d`) or a wire field
/// (milliseconds in a u64), which a bare `1e20` did (a panic, exit 101).
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 86_400);

/// Parses "10s", "500ms", "2m" or a bare number of seconds.
pub fn parse_duration(flag: &'static str, value: &str) -> Result<Duration, ConfigError> {
    let d = parse_pause(flag, value)?;
    if d.is_zero() {
        return Err(ConfigError::Plan(PlanError::NotPositive {
            what: flag,
            value: value.to_string(),
        }));
    }
    Ok(d)
}

/// A duration that may be zero (`--warmup 0s` skips the warmup, `--cooldown 0` pauses not at all).
pub fn parse_pause(flag: &'static str, value: &str) -> Result<Duration, ConfigError> {
    let bad = || ConfigError::Duration {
        flag,
        value: value.to_string(),
    };
    let v = value.trim();
    if v.starts_with('-') {
        // The same answer whether clap saw `--flag -1s` or `--flag=-1s`.
        return Err(ConfigError::Plan(PlanError::NotPositive {
            what: flag,
            value: value.to_string(),
        }));
    }
    let too_long = || ConfigError::DurationTooLong {
        flag,
        value: value.to_string(),
    };
    let d = if let Ok(secs) = v.parse::<f64>() {
        if !(secs.is_finite() && secs >= 0.0) {
            return Err(bad());
        }
        Duration::try_from_secs_f64(secs).map_err(|_| too_long())?
    } else {
        // humantime refuses what overflows a Duration ("500000000000y") in words of its own.
        match humantime::parse_duration(v) {
            Ok(d) => d,
            Err(humantime::DurationError::NumberOverflow) => return Err(too_long()),
            Err(_) => return Err(bad()),
        }
    };
    if d > MAX_DURATION {
        return Err(too_long());
    }
    Ok(d)
}

/// A duration flag's text, parsed; `flag` names it in the error.
pub fn dur(flag: &'static str, v: &Option<DurationText>) -> Result<Option<Duration>, ConfigError> {
    v.as_ref().map(|v| parse_duration(flag, &v.0)).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::command_line;

    #[test]
    fn durations_parse_both_ways() {
        assert_eq!(parse_duration("x", "10s").unwrap(), Duration::from_secs(10));
        assert_eq!(
            parse_duration("x", "2.5").unwrap(),
            Duration::from_millis(2500)
        );
        assert_eq!(
            parse_duration("x", "20ms").unwrap(),
            Duration::from_millis(20)
        );
        assert!(parse_duration("x", "0s").is_err());
        assert!(parse_duration("x", "-1").is_err());
    }

    #[test]
    fn a_duration_past_a_year_is_refused_in_words_not_a_panic() {
        // 1e20 s overflowed Duration::from_secs_f64 (a panic, exit 101); 500000y overflowed the
        // agent's step checks further on ("invalid step 1").
        for v in [
            "1e20",
            "1.8e19",
            "1e300",
            "500000y",
            "367days",
            "99999999999999999999s",
        ] {
            let e = parse_pause("--timeout", v).unwrap_err();
            assert!(matches!(e, ConfigError::DurationTooLong { .. }), "{v}: {e}");
            assert_eq!(
                e.to_string(),
                format!(
                    "--timeout: '{v}' is longer than any duration stampede takes (366 days at most)"
                )
            );
        }
        assert_eq!(parse_pause("x", "366days").unwrap(), MAX_DURATION);
        assert!(matches!(
            parse_pause("x", "NaN").unwrap_err(),
            ConfigError::Duration { .. }
        ));
    }

    #[test]
    fn a_duration_flag_took_the_next_flag_as_its_value() {
        // Regression: "cannot read plan file m4" and "must be a positive number, got --quiet".
        assert_eq!(
            command_line("run http://h:1/ -c 1 -d --out m4").unwrap_err(),
            "--step-duration needs a value: '--out' is the next option"
        );
        assert_eq!(
            command_line("run http://h:1/ -c 1 --timeout --quiet").unwrap_err(),
            "--timeout needs a value: '--quiet' is the next option"
        );
        assert_eq!(
            command_line("run http://h:1/ -c 1 --warmup -q 5").unwrap_err(),
            "--warmup needs a value: '-q' is the next option"
        );
        // A negative duration is still a value, refused as one.
        let e = command_line("run http://h:1/ -c 1 -d -5s").unwrap_err();
        assert!(e.contains("-5s"), "{e}");
    }
}
