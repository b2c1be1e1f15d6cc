//! `--wsesslog N,X,FILE` (or a plan file's `wsesslog`): httperf's session log read into the
//! workload's requests (each distinct method, URI and body once, on the target's origin, with the
//! run's headers) and the sessions that name them; N, the sessions a step, becomes the step's count
//! of arrivals as `--num-conn` is, and the longest session what one arrival may bring (so every
//! bound taken of `--num-call`, an agent's claims and the rate its policy checks, holds). The
//! settings a log replaces are refused beside it, each in one line.
use std::time::Duration;

use shared::plan::{
    Burst, LoadModel, LoggedRequest, LoggedSession, PlanError, RequestSpec, Sessions,
    parse_wsesslog,
};

use super::super::{ConfigError, Settings, parse_pause, read_file};
use super::mix::Named;
use crate::cli::SessionRequest;

/// The workload's requests and whether the target's scheme names HTTP/2 (as
/// [`super::requests`] gives them), with the sessions of a `--wsesslog` run (or a plan's
/// `[[session]]` tables); `s` then says N as the step's count and the longest session as its
/// requests per arrival.
pub fn requests(s: &mut Settings) -> Result<(Named, bool, Option<Sessions>), ConfigError> {
    let Some(Given {
        parsed,
        think,
        count,
        at,
    }) = sessions_given(s)?
    else {
        let (named, by_scheme) = super::requests(s)?;
        return Ok((named, by_scheme, None));
    };
    refuse_beside(s)?;
    let (logged, sessions) = Sessions::from_log(&parsed, think).map_err(|e| at(&e))?;
    // The target's request as the flags make it: its origin, and the headers every request takes.
    let (base, by_scheme) = super::requests(s)?;
    let base = base
        .requests
        .into_iter()
        .next()
        .ok_or(PlanError::NoRequests)?;
    let origin = base.url().origin();
    let requests = logged
        .iter()
        .map(|r| {
            if !r.uri.starts_with('/') {
                return Err(at(&format_args!(
                    "'{}' is not a path: write each request as /path (the target's URL gives the server)",
                    r.uri
                )));
            }
            RequestSpec::try_new(
                &r.method,
                &format!("{origin}{}", r.uri),
                base.headers().to_vec(),
                r.body.clone(),
            )
            .map_err(|e| at(&e))
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    if count > 0 {
        s.given.num_conn = Some(count);
    }
    s.num_call = u32::try_from(sessions.max_requests()).unwrap_or(u32::MAX);
    let named = Named {
        weights: vec![1; requests.len()],
        requests,
        names: Vec::new(),
    };
    Ok((named, by_scheme, Some(sessions)))
}

/// Words of an error, said where the sessions came from.
type Where = Box<dyn Fn(&dyn std::fmt::Display) -> ConfigError>;

/// The sessions given, read.
struct Given {
    parsed: Vec<LoggedSession>,
    /// The think time of a burst that gives none (X).
    think: Duration,
    /// N: the sessions a step (0: none).
    count: u64,
    /// Where to say an error is.
    at: Where,
}

/// The sessions given: from `--wsesslog`'s file, or the plan's `[[session]]` tables.
fn sessions_given(s: &Settings) -> Result<Option<Given>, ConfigError> {
    let g = &s.given;
    if let Some(log) = &g.wsesslog {
        if !g.session.is_empty() {
            return Err(ConfigError::Conflict(
                "give --wsesslog or the plan file's [[session]] tables, not both".into(),
            ));
        }
        let think = parse_pause("--wsesslog's think time X (of N,X,FILE)", &log.think.0)?;
        let text = String::from_utf8(read_file("session log", &log.file)?).map_err(|_| {
            ConfigError::File(format!(
                "session log {}: not UTF-8 text",
                log.file.display()
            ))
        })?;
        let file = log.file.display().to_string();
        let at: Where = Box::new(move |e| ConfigError::File(format!("session log {file}, {e}")));
        let parsed = parse_wsesslog(&text).map_err(|e| at(&e))?;
        return Ok(Some(Given {
            parsed,
            think,
            count: log.sessions,
            at,
        }));
    }
    if g.session.is_empty() {
        return Ok(None);
    }
    let at: Where = Box::new(|e| ConfigError::Value(format!("the plan's [[session]] tables: {e}")));
    let mut parsed = Vec::with_capacity(g.session.len());
    for (i, entry) in g.session.iter().enumerate() {
        let mut bursts = Vec::with_capacity(entry.burst.len());
        for b in &entry.burst {
            let think = b
                .think
                .as_ref()
                .map(|t| parse_pause("a [[session.burst]]'s think", &t.0))
                .transpose()?;
            let requests = b
                .requests
                .iter()
                .map(|r| match r {
                    SessionRequest::Path(uri) => LoggedRequest {
                        method: "GET".into(),
                        uri: uri.clone(),
                        body: Vec::new(),
                    },
                    SessionRequest::Full(f) => LoggedRequest {
                        method: f.method.clone().unwrap_or_else(|| "GET".into()),
                        uri: f.uri.clone(),
                        body: f.body.clone().unwrap_or_default().into_bytes(),
                    },
                })
                .collect();
            bursts.push(Burst { requests, think });
        }
        if bursts.is_empty() || bursts.iter().any(|b| b.requests.is_empty()) {
            return Err(at(&format_args!(
                "session {} has a burst without a request, or none: give each [[session.burst]] its requests",
                i + 1
            )));
        }
        parsed.push(LoggedSession { bursts });
    }
    // N is --num-conn's, as the file's would be; a burst without think pauses not at all.
    Ok(Some(Given {
        parsed,
        think: Duration::ZERO,
        count: 0,
        at,
    }))
}

/// Settings a session log replaces, or that cannot go with it: one line each, saying why.
fn refuse_beside(s: &Settings) -> Result<(), ConfigError> {
    let g = &s.given;
    let sessions = if g.wsesslog.is_some() {
        "--wsesslog"
    } else {
        "the plan's [[session]] tables"
    };
    let conflict = |what: &str, why: &str| {
        Err(ConfigError::Conflict(format!(
            "{sessions} and {what}: {why}"
        )))
    };
    if g.urls.is_some()
        || g.body.is_some()
        || g.body_file.is_some()
        || s.method != "GET"
        || !g.request.is_empty()
    {
        return conflict(
            "--urls, --body, --body-file, --method or the plan's [[request]] mix",
            "the session log gives each request's method, URI and body",
        );
    }
    if s.num_call != 1 {
        return conflict(
            "--num-call",
            "a session's requests are the log's, on one connection",
        );
    }
    if s.model != LoadModel::Connections {
        return Err(PlanError::SessionsWithoutConnections(s.model.name()).into());
    }
    let count = g.wsesslog.as_ref().map_or(0, |w| w.sessions);
    if count > 0 && (g.num_conn.is_some() || s.step_duration_given) {
        return conflict(
            "--num-conn or --step-duration",
            "N of N,X,FILE ends each step after N sessions; give N 0 to end steps by --step-duration",
        );
    }
    Ok(())
}

/// The log's file, think time and count as run.json echoes them (a plan's `[[session]]` tables as
/// `[[session]]`, X 0 and no count).
pub fn echo(s: &Settings, sessions: Option<&Sessions>) -> Option<results::run_file::WsesslogEcho> {
    let sessions = sessions?;
    let (file, think_s, count) = match &s.given.wsesslog {
        Some(log) => (
            log.file.display().to_string(),
            parse_pause("--wsesslog", &log.think.0).map_or(0.0, |d| d.as_secs_f64()),
            (log.sessions > 0).then_some(log.sessions),
        ),
        None => ("[[session]]".to_string(), 0.0, None),
    };
    Some(results::run_file::WsesslogEcho {
        file,
        think_s,
        count,
        sessions: sessions.list().len() as u64,
        max_requests: sessions.max_requests() as u64,
        requests: sessions.list().iter().map(|s| s.requests() as u64).sum(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use shared::plan::StepLimit;

    use crate::config::tests::{command_line, with_plan};

    /// A session log in a directory of its own for one test, and its path.
    fn log_file(text: &str) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sessions.log");
        std::fs::write(&p, text).unwrap();
        (dir, p.display().to_string())
    }

    #[test]
    fn a_log_becomes_the_requests_the_sessions_and_each_step_s_count() {
        let (_dir, path) = log_file("/a think=0.5\n  /b\n/c method=POST contents='x'\n\n/a\n");
        let c = command_line(&format!(
            "run http://127.0.0.1:9/ --steps 5 -H X-Run:1 --wsesslog 3,0.05,{path}"
        ))
        .unwrap();
        let w = c.plan.workload();
        let urls: Vec<_> = w
            .requests()
            .iter()
            .map(|r| format!("{} {}", r.method(), r.url().path()))
            .collect();
        assert_eq!(urls, ["GET /a", "GET /b", "POST /c"]);
        assert!(w.requests().iter().all(|r| r.headers().len() == 1));
        let sessions = w.sessions().unwrap();
        assert_eq!(sessions.list().len(), 2);
        assert_eq!(
            sessions.list()[0].bursts()[1].think(),
            Duration::from_millis(50)
        );
        // N ends each step after 3 sessions; an arrival brings 3 requests at most.
        assert_eq!(
            c.plan.limit(),
            StepLimit::Connections(std::num::NonZeroU64::new(3).unwrap())
        );
        assert_eq!(c.plan.num_call().get(), 3);
        let echo = c.echo.wsesslog.unwrap();
        assert_eq!((echo.sessions, echo.requests, echo.count), (2, 4, Some(3)));
    }

    #[test]
    fn what_cannot_go_with_a_log_is_refused_in_one_line() {
        let (_dir, path) = log_file("/a\n");
        let e = |extra: &str| {
            command_line(&format!(
                "run http://127.0.0.1:9/ --steps 5 --wsesslog 0,0,{path} {extra}"
            ))
            .unwrap_err()
        };
        let model = e("--model requests");
        assert!(model.contains("runs in the connections model"), "{model}");
        assert!(e("--num-call 2").starts_with("--wsesslog and --num-call"));
        assert!(e("--body x").starts_with("--wsesslog and --urls, --body"));
        let n = command_line(&format!(
            "run http://127.0.0.1:9/ --steps 5 -d 5s --wsesslog 4,0,{path}"
        ))
        .unwrap_err();
        assert!(
            n.contains("give N 0 to end steps by --step-duration"),
            "{n}"
        );
        for (value, words) in [
            ("1,2", "is not N,X,FILE"),
            ("x,1,f", "'x' is not a number of sessions"),
            ("1,soon,/x", "'soon' is not a duration"),
        ] {
            let e = command_line(&format!(
                "run http://127.0.0.1:9/ --steps 5 --wsesslog {value}"
            ))
            .unwrap_err();
            assert!(e.contains(words), "{value}: {e}");
        }
        let (_bad_dir, bad) = log_file("/a think=soon\n");
        let e = command_line(&format!(
            "run http://127.0.0.1:9/ --steps 5 --wsesslog 0,0,{bad}"
        ))
        .unwrap_err();
        assert!(
            e.starts_with("session log ") && e.contains("line 1: think=soon"),
            "{e}"
        );
        let (_abs_dir, absolute) = log_file("http://elsewhere/a\n");
        let e = command_line(&format!(
            "run http://127.0.0.1:9/ --steps 5 --wsesslog 0,0,{absolute}"
        ))
        .unwrap_err();
        assert!(e.contains("is not a path"), "{e}");
    }

    #[test]
    fn a_plan_file_writes_its_sessions_as_tables_of_bursts() {
        let plan = r#"
url = "http://127.0.0.1:9/"
steps = [5]
num_conn = 4

[[session]]
[[session.burst]]
requests = ["/index.html", "/style.css"]
think = "50ms"
[[session.burst]]
requests = [{ uri = "/login", method = "POST", body = "user=ann" }]

[[session]]
[[session.burst]]
requests = ["/index.html"]
think = 1.5
"#;
        let (_dir, c) = with_plan(plan, "");
        let c = c.unwrap();
        let w = c.plan.workload();
        let sessions = w.sessions().unwrap();
        assert_eq!(sessions.list().len(), 2);
        let first = &sessions.list()[0];
        assert_eq!(first.bursts()[0].requests(), [0, 1]);
        assert_eq!(first.bursts()[0].think(), Duration::from_millis(50));
        assert_eq!(first.bursts()[1].think(), Duration::ZERO);
        assert_eq!(sessions.list()[1].bursts()[0].requests(), [0]);
        assert_eq!(
            sessions.list()[1].bursts()[0].think(),
            Duration::from_millis(1500)
        );
        let login = &w.requests()[2];
        assert_eq!((login.method(), login.body()), ("POST", &b"user=ann"[..]));
        assert_eq!(
            c.plan.limit(),
            StepLimit::Connections(std::num::NonZeroU64::new(4).unwrap())
        );
        assert_eq!(c.echo.wsesslog.unwrap().file, "[[session]]");
        // Beside --wsesslog, or with a burst of nothing: one line each.
        let (_d, e) = with_plan(plan, "--wsesslog 0,0,x.log");
        assert!(e.unwrap_err().to_string().contains("not both"));
        let (_d, e) = with_plan(
            "url = \"http://127.0.0.1:9/\"\nsteps = [5]\n[[session]]\n[[session.burst]]\nrequests = []\n",
            "",
        );
        assert!(
            e.unwrap_err()
                .to_string()
                .contains("a burst without a request"),
        );
        let (_d, e) = with_plan(
            "url = \"http://127.0.0.1:9/\"\nsteps = [5]\n[[session]]\n[[session.burst]]\nrequests = [{ uri = \"/a\", method = \"P?T\" }]\n",
            "",
        );
        let e = e.unwrap_err().to_string();
        assert!(
            e.starts_with("the plan's [[session]] tables: bad method"),
            "{e}"
        );
    }

    #[test]
    fn a_plan_file_gives_the_log_as_a_table_its_path_relative_to_the_plan() {
        let (dir, c) = with_plan(
            "url = \"http://127.0.0.1:9/\"\nsteps = [2]\nstep_duration = \"3s\"\n\n[wsesslog]\nfile = \"s.log\"\nthink = \"20ms\"\n",
            "",
        );
        // Written after the plan: the file is read as the plan is resolved.
        drop(c);
        std::fs::write(dir.path().join("s.log"), "/x\n  /y\n\n/z\n").unwrap();
        let line = format!("stampede run {}", dir.path().join("plan.toml").display());
        let cli = crate::cli::parse_from(line.split_whitespace()).unwrap();
        let crate::cli::Command::Run(a) = cli.command else {
            unreachable!("a run command line")
        };
        let c = crate::config::resolve(*a).unwrap();
        let sessions = c.plan.workload().sessions().unwrap();
        assert_eq!(sessions.list().len(), 2);
        assert_eq!(
            sessions.list()[0].bursts()[0].think(),
            Duration::from_millis(20)
        );
        assert!(matches!(c.plan.limit(), StepLimit::Duration(_)));
    }
}
