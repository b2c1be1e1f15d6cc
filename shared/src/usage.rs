//! How the binaries word a command-line error: one line naming the problem, never clap's block of
//! tips and usage (its "to pass '-c' as a value, use '-- -c'" misleads anyone who meant a flag).
use clap::error::{ContextKind, ContextValue, ErrorKind};

/// A flag's value that is the next option (`-d --out m4`, `--timeout --quiet`): it starts with '-' and
/// holds no digit. The duration flags let a value start with '-', so that `-5s` meets the clear refusal
/// of a negative duration rather than clap's "unexpected argument"; without this check they took the
/// next flag as their value ("cannot read plan file m4").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is the next option, not a value")]
pub struct NextOption(pub String);

/// Refuses a value that is the next option rather than one a flag could take (see [`NextOption`]).
pub fn not_the_next_option(value: &str) -> Result<(), NextOption> {
    if value.starts_with('-') && !value.contains(|c: char| c.is_ascii_digit()) {
        return Err(NextOption(value.to_string()));
    }
    Ok(())
}

/// Whether clap's error is a request for help or the version, which clap prints itself.
pub fn is_display(e: &clap::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    )
}

fn context(e: &clap::Error, kind: ContextKind) -> Option<String> {
    match e.get(kind)? {
        ContextValue::String(s) => Some(s.clone()),
        ContextValue::Strings(v) => Some(match v.as_slice() {
            [] => String::new(),
            [one] => one.clone(),
            [init @ .., last] => format!("{} or {last}", init.join(", ")),
        }),
        other => Some(other.to_string()),
    }
}

/// One line for a clap error. `hint` may answer an unknown option a user brought from another tool.
pub fn one_line(e: &clap::Error, hint: impl Fn(&str) -> Option<String>) -> String {
    // clap names an argument as '--steps <STEPS>'; the flag is enough.
    let arg = context(e, ContextKind::InvalidArg)
        .map(|a| a.split(' ').next().unwrap_or_default().to_string());
    let value = context(e, ContextKind::InvalidValue);
    match (e.kind(), arg, value) {
        (ErrorKind::UnknownArgument, Some(arg), _) => {
            hint(&arg).unwrap_or_else(|| match context(e, ContextKind::SuggestedArg) {
                Some(s) => format!("unknown option {arg}: did you mean {s}?"),
                None => format!("unknown option {arg} (--help lists the options)"),
            })
        }
        (ErrorKind::InvalidValue, Some(arg), Some(value)) => {
            // clap gives an empty list of valid values for a free-form argument.
            match (
                context(e, ContextKind::ValidValue).filter(|v| !v.is_empty()),
                value.is_empty(),
            ) {
                (Some(valid), true) => format!("{arg} needs a value: use {valid}"),
                (Some(valid), false) => format!("{arg}: unknown value '{value}': use {valid}"),
                (None, _) => format!("{arg} needs a value"),
            }
        }
        (ErrorKind::MissingRequiredArgument, _, _) => {
            // clap puts the list on the lines after its first; each as '--flag <VALUE>'.
            let missing: Vec<String> = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::Strings(v)) => v
                    .iter()
                    .map(|a| a.split(' ').next().unwrap_or_default().to_string())
                    .collect(),
                _ => Vec::new(),
            };
            match missing.as_slice() {
                [] => "a required argument was not given (--help lists them)".to_string(),
                [one] => format!("{one} is required here (--help says what it takes)"),
                many => format!(
                    "{} are required here (--help says what they take)",
                    many.join(", ")
                ),
            }
        }
        (ErrorKind::ValueValidation, Some(arg), Some(value))
            if std::error::Error::source(e).is_some_and(|s| s.is::<NextOption>()) =>
        {
            format!("{arg} needs a value: '{value}' is the next option")
        }
        (ErrorKind::ValueValidation, Some(arg), Some(value)) => {
            let why = std::error::Error::source(e)
                .map(ToString::to_string)
                .unwrap_or_else(|| "not a valid value".into());
            format!("{arg} '{value}': {why}")
        }
        _ => {
            // Everything else: clap's first line, without its "error: " and styling.
            let rendered = e.render().to_string();
            let first = rendered.lines().next().unwrap_or_default();
            first.trim_start_matches("error: ").to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Args {
        #[arg(long, requires = "count")]
        listen: Option<u32>,
        #[arg(long)]
        count: Option<u32>,
        #[arg(long, value_parser = ["a", "b", "c"])]
        pick: Option<String>,
    }

    #[derive(Debug, Clone)]
    struct Wait(String);

    impl std::str::FromStr for Wait {
        type Err = NextOption;
        fn from_str(s: &str) -> Result<Self, NextOption> {
            not_the_next_option(s).map(|()| Wait(s.to_string()))
        }
    }

    #[derive(Debug, Parser)]
    struct Timed {
        /// As `run`'s plan or URL, which took the `m4` of `-d --out m4`.
        plans: Vec<String>,
        #[arg(long, short = 'd', allow_hyphen_values = true)]
        duration: Option<Wait>,
        #[arg(long)]
        out: Option<String>,
        #[arg(long)]
        quiet: bool,
    }

    #[test]
    fn a_duration_flag_swallowed_the_next_flag() {
        // Regression: `-d --out m4` read "cannot read plan file m4", `--timeout --quiet` "must be a
        // positive number, got --quiet".
        let error = |argv: &[&str]| one_line(&Timed::try_parse_from(argv).unwrap_err(), |_| None);
        assert_eq!(
            error(&["t", "-d", "--out", "m4"]),
            "--duration needs a value: '--out' is the next option"
        );
        assert_eq!(
            error(&["t", "--duration", "--quiet"]),
            "--duration needs a value: '--quiet' is the next option"
        );
        // A negative value is a value, refused later with its own words.
        let t = Timed::try_parse_from(["t", "-d", "-5s", "--quiet"]).unwrap();
        assert_eq!(t.duration.unwrap().0, "-5s");
        assert!(t.quiet);
        assert_eq!(not_the_next_option("-"), Err(NextOption("-".into())));
        assert_eq!(not_the_next_option("-0.5"), Ok(()));
        assert_eq!(not_the_next_option("10s"), Ok(()));
    }

    fn error(argv: &[&str]) -> String {
        let e = Args::try_parse_from(argv).unwrap_err();
        one_line(&e, |a| (a == "-k").then(|| "keep-alive is a model".into()))
    }

    #[test]
    fn a_missing_required_argument_was_a_sentence_ending_in_a_colon() {
        // clap's first line is "the following required arguments were not provided:", the list below.
        assert_eq!(
            error(&["t", "--listen", "1"]),
            "--count is required here (--help says what it takes)"
        );
    }

    #[test]
    fn a_clap_error_is_one_line_without_the_dash_dash_tip() {
        assert_eq!(
            error(&["x", "-z"]),
            "unknown option -z (--help lists the options)"
        );
        assert_eq!(error(&["x", "-k"]), "keep-alive is a model");
        assert_eq!(
            error(&["x", "--coun", "1"]),
            "unknown option --coun: did you mean --count?"
        );
        assert_eq!(
            error(&["x", "--pick", "d"]),
            "--pick: unknown value 'd': use a, b or c"
        );
        assert_eq!(
            error(&["x", "--count", "x"]),
            "--count 'x': invalid digit found in string"
        );
        // A free-form argument left without its value: no dangling "use".
        assert_eq!(error(&["x", "--count"]), "--count needs a value");
        for argv in [
            &["x", "-z"][..],
            &["x", "--count"],
            &["x", "--count", "1", "y"],
        ] {
            let line = error(argv);
            assert!(!line.contains('\n') && !line.contains("tip"), "{line}");
        }
    }
}
