//! The command line's positional arguments: at most one plan file and the targets, each a URL or
//! `NAME=URL`. A name (a label) becomes a directory name, so it is checked as one here; several
//! targets must each have their own.
use std::path::{Path, PathBuf};

use shared::plan::{PlanError, Url, http2_spelling};

/// One target as the command line gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `NAME` of `NAME=URL`.
    pub label: Option<String>,
    pub url: String,
}

/// The positional arguments, sorted out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Positionals {
    pub plan: Option<PathBuf>,
    pub targets: Vec<Target>,
}

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("{0}")]
    Url(#[from] PlanError),
    #[error("label '{label}' is not a valid directory name: {why}")]
    Label { label: String, why: &'static str },
    #[error("two plan files, {first} and {second}: give one (targets are URLs or NAME=URL)")]
    TwoPlans { first: String, second: String },
    #[error(
        "target {n} ({url}) has no label: with several targets, name each NAME=URL (e.g. {example}={url})"
    )]
    Unlabeled {
        n: usize,
        url: String,
        example: String,
    },
    #[error("label '{label}' names targets {first} and {second}: each target needs its own{}", if *.exact { "" } else { " (labels differing only in case would share a directory on some file systems)" })]
    Duplicate {
        label: String,
        first: usize,
        second: usize,
        exact: bool,
    },
}

/// Why `label` cannot name a results directory, if it cannot.
pub fn check_label(label: &str) -> Result<(), TargetError> {
    let bad = |why| {
        Err(TargetError::Label {
            label: label.to_string(),
            why,
        })
    };
    if label.is_empty() {
        return bad("it is empty");
    }
    if label == "." || label == ".." {
        return bad("it names a directory that already is one (. or ..)");
    }
    if label.len() > 100 {
        return bad("it is longer than 100 characters");
    }
    if !label
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    {
        return bad("use letters, digits, '_', '.' and '-' only");
    }
    Ok(())
}

/// Sorts the positional arguments into a plan file and targets; with several targets, each must be
/// named, and no two alike.
pub fn split(args: &[String]) -> Result<Positionals, TargetError> {
    let mut out = Positionals::default();
    for arg in args {
        match classify(arg)? {
            Some(t) => out.targets.push(t),
            None => match &out.plan {
                Some(first) => {
                    return Err(TargetError::TwoPlans {
                        first: first.display().to_string(),
                        second: arg.clone(),
                    });
                }
                None => out.plan = Some(PathBuf::from(arg)),
            },
        }
    }
    if out.targets.len() > 1 {
        check_labels(&out.targets)?;
    }
    Ok(out)
}

/// Every target labelled, and no label twice (nor twice but for case).
fn check_labels(targets: &[Target]) -> Result<(), TargetError> {
    for (i, t) in targets.iter().enumerate() {
        let Some(label) = &t.label else {
            return Err(TargetError::Unlabeled {
                n: i + 1,
                url: t.url.clone(),
                example: example_label(&t.url),
            });
        };
        let same = targets[..i].iter().position(|o| {
            o.label
                .as_ref()
                .is_some_and(|l| l.eq_ignore_ascii_case(label))
        });
        if let Some(first) = same {
            return Err(TargetError::Duplicate {
                label: label.clone(),
                first: first + 1,
                second: i + 1,
                exact: targets[first].label.as_deref() == Some(label.as_str()),
            });
        }
    }
    Ok(())
}

/// A label to suggest for a URL: its host, if that is a valid label (an IPv6 address is not).
fn example_label(url: &str) -> String {
    let host = Url::parse(&http2_spelling(url).unwrap_or_else(|| url.to_string()))
        .map(|u| u.host().to_string())
        .unwrap_or_default();
    match check_label(&host) {
        Ok(()) => host,
        Err(_) => "NAME".into(),
    }
}

/// A target (`Some`), or a plan file (`None`): an existing file is a plan; `NAME=` before anything
/// that is no file is a label; a URL must be http(s), h2c or h2, and is answered "did you mean"
/// without a scheme.
fn classify(arg: &str) -> Result<Option<Target>, TargetError> {
    if is_http(arg) {
        return Ok(Some(Target {
            label: None,
            url: arg.to_string(),
        }));
    }
    if Path::new(arg).exists() {
        return Ok(None);
    }
    if let Some((label, url)) = labelled(arg) {
        check_label(label)?;
        check_url(url, &format!("{label}="))?;
        return Ok(Some(Target {
            label: Some(label.to_string()),
            url: url.to_string(),
        }));
    }
    if arg.contains("://") {
        check_url(arg, "")?;
    }
    if let Some(fixed) = mistyped_scheme(arg) {
        return Err(no_scheme(arg, &fixed, ""));
    }
    match schemeless_url(arg) {
        Some(guess) => Err(no_scheme(arg, &guess, "")),
        None => Ok(None),
    }
}

/// A URL's scheme is one a target takes: http(s), or h2c/h2 that name HTTP/2 as well.
fn is_http(s: &str) -> bool {
    s.starts_with("http://") || s.starts_with("https://") || http2_spelling(s).is_some()
}

/// `NAME=REST` where NAME is no URL's start (no ':'), and no path's unless a URL follows (so that
/// `../b=http://…` is told its label is bad, and a missing `plans/a=b.toml` that it cannot be read).
fn labelled(arg: &str) -> Option<(&str, &str)> {
    let (label, rest) = arg.split_once('=')?;
    let path_like = label.contains('/') && !rest.contains("://");
    (!label.contains(':') && !path_like).then_some((label, rest))
}

/// A URL as a target's: http(s), h2c or h2, or an error saying what to write (`prefix` is the `NAME=` it came
/// after, so the suggestion can be pasted back).
fn check_url(url: &str, prefix: &str) -> Result<(), TargetError> {
    if is_http(url) {
        return Ok(());
    }
    let shown = format!("{prefix}{url}");
    if url.contains("://") {
        return Err(PlanError::BadUrl {
            url: shown,
            why: "it must start with http://, https://, h2c:// or h2://".into(),
        }
        .into());
    }
    if url.is_empty() {
        return Err(PlanError::BadUrl {
            url: shown,
            why: "no URL after the label's '='".into(),
        }
        .into());
    }
    let guess = mistyped_scheme(url)
        .or_else(|| schemeless_url(url))
        .unwrap_or_else(|| format!("http://{url}"));
    Err(no_scheme(url, &guess, prefix))
}

/// `http//host`, `http:/host`, `https:host`: a scheme written with its `:` or a `/` missing, as
/// the URL it was meant to be (not `http://http//host`).
fn mistyped_scheme(arg: &str) -> Option<String> {
    ["https", "http"].iter().find_map(|scheme| {
        let rest = arg
            .get(..scheme.len())
            .filter(|s| s.eq_ignore_ascii_case(scheme))?;
        let after = &arg[rest.len()..];
        let host = after.trim_start_matches(':').trim_start_matches('/');
        let marked = after.starts_with(':') || after.starts_with('/');
        (marked && !host.is_empty() && after != "://" && !after.starts_with("://"))
            .then(|| format!("{scheme}://{host}"))
    })
}

fn no_scheme(url: &str, guess: &str, prefix: &str) -> TargetError {
    PlanError::BadUrl {
        url: format!("{prefix}{url}"),
        why: format!("it has no scheme: did you mean {prefix}{guess}?"),
    }
    .into()
}

/// Whether an argument that is no file is a URL written without its scheme: what it would be with one.
fn schemeless_url(arg: &str) -> Option<String> {
    let guess = format!("http://{arg}");
    let url = Url::parse(&guess).ok()?;
    let named_port = arg.contains(':') || url.host() == "localhost";
    (named_port && !arg.ends_with(".toml")).then_some(guess)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_line(line: &str) -> Result<Positionals, String> {
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        split(&args).map_err(|e| e.to_string())
    }

    fn target(label: Option<&str>, url: &str) -> Target {
        Target {
            label: label.map(String::from),
            url: url.into(),
        }
    }

    #[test]
    fn named_targets_keep_their_order_and_urls() {
        let p = split_line("nginx=http://a:8080/x?q=1 app=https://b:8081/").unwrap();
        assert_eq!(p.plan, None);
        assert_eq!(
            p.targets,
            vec![
                target(Some("nginx"), "http://a:8080/x?q=1"),
                target(Some("app"), "https://b:8081/")
            ]
        );
        // One target may go unnamed; a URL's own '=' is not a label.
        let p = split_line("http://a:1/?k=v").unwrap();
        assert_eq!(p.targets, vec![target(None, "http://a:1/?k=v")]);
        let p = split_line("v1.2_x-y=http://a:1/").unwrap();
        assert_eq!(p.targets[0].label.as_deref(), Some("v1.2_x-y"));
    }

    #[test]
    fn targets_may_name_http2_by_their_scheme() {
        let p = split_line("h1=http://a:1/ c=h2c://a:1/ t=h2://b/").unwrap();
        assert_eq!(
            p.targets,
            vec![
                target(Some("h1"), "http://a:1/"),
                target(Some("c"), "h2c://a:1/"),
                target(Some("t"), "h2://b/")
            ]
        );
        assert_eq!(split_line("h2c://a:1/").unwrap().targets.len(), 1);
        // Unlabeled among several, it is told a label from its host as an http:// one is.
        let e = split_line("a=http://a:1/ h2c://b.example:2/").unwrap_err();
        assert!(e.contains("(e.g. b.example=h2c://b.example:2/)"), "{e}");
    }

    #[test]
    fn a_plan_file_sits_among_the_targets() {
        let dir = tempfile::tempdir().unwrap();
        let plan = dir.path().join("a=b.toml");
        std::fs::write(&plan, "").unwrap();
        let plan_arg = plan.display().to_string();
        let p = split_line(&format!("a=http://h:1/ {plan_arg} b=http://h:2/")).unwrap();
        assert_eq!(
            p.plan,
            Some(plan.clone()),
            "an existing file is the plan, '=' or not"
        );
        assert_eq!(p.targets.len(), 2);
        let e = split_line(&format!("{plan_arg} {plan_arg}")).unwrap_err();
        assert!(e.starts_with("two plan files, "), "{e}");
        // A name that is no file is still taken for a plan, and its reading will say so.
        for missing in ["missing.toml", "plans/a=b.toml"] {
            assert_eq!(
                split_line(missing).unwrap().plan,
                Some(PathBuf::from(missing))
            );
        }
    }

    #[test]
    fn several_targets_each_need_their_own_label() {
        let e = split_line("nginx=http://a:8080/ http://b.example:8081/").unwrap_err();
        assert_eq!(
            e,
            "target 2 (http://b.example:8081/) has no label: with several targets, name each \
             NAME=URL (e.g. b.example=http://b.example:8081/)"
        );
        let e = split_line("http://[::1]:1/ b=http://h:2/").unwrap_err();
        assert!(e.contains("(e.g. NAME=http://[::1]:1/)"), "{e}");
        let e = split_line("app=http://a:1/ x=http://b:2/ app=http://c:3/").unwrap_err();
        assert_eq!(
            e,
            "label 'app' names targets 1 and 3: each target needs its own"
        );
        let e = split_line("App=http://a:1/ app=http://c:3/").unwrap_err();
        assert!(
            e.starts_with("label 'app' names targets 1 and 2: each target needs its own (labels differing only in case"),
            "{e}"
        );
    }

    #[test]
    fn a_label_that_is_no_directory_name_is_refused() {
        for (arg, why) in [
            ("..=http://a:1/", "(. or ..)"),
            (".=http://a:1/", "(. or ..)"),
            ("=http://a:1/", "it is empty"),
            ("a b=http://a:1/", "letters, digits"),
            ("ngïnx=http://a:1/", "letters, digits"),
            ("a\\b=http://a:1/", "letters, digits"),
            ("../b=http://a:1/", "letters, digits"),
        ] {
            // Not split on whitespace: the label itself may hold a space.
            let e = split(&[arg.to_string()]).unwrap_err().to_string();
            assert!(
                e.starts_with("label '")
                    && e.contains("is not a valid directory name")
                    && e.contains(why),
                "{arg}: {e}"
            );
        }
        assert!(check_label(&"a".repeat(101)).is_err());
        assert!(check_label(&"a".repeat(100)).is_ok());
    }

    #[test]
    fn urls_without_their_scheme_are_answered_with_one() {
        let e = split_line("app=localhost:8080").unwrap_err();
        assert_eq!(
            e,
            "bad URL 'app=localhost:8080': it has no scheme: did you mean app=http://localhost:8080?"
        );
        let e = split_line("app=ftp://h/").unwrap_err();
        assert!(
            e.contains("must start with http://, https://, h2c:// or h2://"),
            "{e}"
        );
        let e = split_line("app=").unwrap_err();
        assert!(e.contains("no URL after the label's '='"), "{e}");
        let e = split_line("127.0.0.1:8080").unwrap_err();
        assert!(e.contains("did you mean http://127.0.0.1:8080?"), "{e}");
    }

    #[test]
    fn a_mistyped_scheme_was_answered_with_a_second_scheme() {
        for (arg, meant) in [
            ("http//host", "http://host"),
            ("http//127.0.0.1:8080/x", "http://127.0.0.1:8080/x"),
            ("http:/host:80", "http://host:80"),
            ("https//host", "https://host"),
            ("app=http//host:1", "app=http://host:1"),
        ] {
            let e = split(&[arg.to_string()]).unwrap_err().to_string();
            assert!(e.contains(&format!("did you mean {meant}?")), "{arg}: {e}");
            assert!(!e.contains("http://http"), "{arg}: {e}");
        }
        let e = split_line("ws://h/").unwrap_err();
        assert!(e.contains("must start with http://, https://"), "{e}");
    }
}
