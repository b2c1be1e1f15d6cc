//! httperf's session log (`--wsesslog=N,X,FILE`) read as httperf reads it, so a file written for
//! httperf runs unchanged: a blank line ends a session; a line that starts a request in column 0
//! starts a burst, an indented one joins the burst above (sent once the burst's first reply is in);
//! `method=M`, `think=SECONDS` (the pause after the burst) and `contents=…` (a body, quoted with `'`
//! or `"`, with `\n`, `\r`, `\t` and a backslash before a line break continuing it) follow the URI;
//! a `#` in column 0 is a comment.
use std::time::Duration;

/// One request of a burst.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LoggedRequest {
    pub method: String,
    /// The URI as written: a path (with its query) on the target.
    pub uri: String,
    pub body: Vec<u8>,
}

/// Requests sent together, then a pause; `think` is `None` where the file leaves it to the default.
#[derive(Debug, Clone, PartialEq)]
pub struct Burst {
    pub requests: Vec<LoggedRequest>,
    pub think: Option<Duration>,
}

/// One session of the file: its bursts in order.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedSession {
    pub bursts: Vec<Burst>,
}

impl LoggedSession {
    pub fn requests(&self) -> usize {
        self.bursts.iter().map(|b| b.requests.len()).sum()
    }
}

/// What is wrong with a session log, by its line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WsesslogError {
    #[error(
        "line {line}: '{arg}' is not method=, think= or contents= (httperf's session log knows only these)"
    )]
    UnknownArg { line: usize, arg: String },
    #[error("line {line}: think={value} is not a number of seconds from 0 up")]
    BadThink { line: usize, value: String },
    #[error("line {line}: method={value} is not an HTTP method")]
    BadMethod { line: usize, value: String },
    #[error("line {line}: the contents go on past the file's end (a backslash ends its last line)")]
    Unfinished { line: usize },
    #[error("line {line}: the contents' quote is never closed")]
    Unclosed { line: usize },
    #[error("it holds no request: write one URI a line, a blank line between sessions")]
    Empty,
}

/// Reads a whole session log.
pub fn parse(text: &str) -> Result<Vec<LoggedSession>, WsesslogError> {
    let mut sessions = Vec::new();
    let mut current: Vec<Burst> = Vec::new();
    let mut lines = text
        .split_inclusive('\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l));
    while let Some((line, raw)) = lines.next() {
        if raw.starts_with('#') {
            continue;
        }
        let Some((uri, rest)) = first_word(raw) else {
            if !current.is_empty() {
                sessions.push(LoggedSession {
                    bursts: std::mem::take(&mut current),
                });
            }
            continue;
        };
        let request = LoggedRequest {
            method: "GET".into(),
            uri: uri.into(),
            body: Vec::new(),
        };
        let joins = raw.starts_with(|c: char| c.is_ascii_whitespace());
        match current.last_mut() {
            Some(burst) if joins => burst.requests.push(request),
            _ => current.push(Burst {
                requests: vec![request],
                think: None,
            }),
        }
        let burst = current
            .last_mut()
            .expect("a burst was just pushed or joined");
        args(rest, line, &mut lines, burst)?;
    }
    if !current.is_empty() {
        sessions.push(LoggedSession { bursts: current });
    }
    if sessions.is_empty() {
        return Err(WsesslogError::Empty);
    }
    Ok(sessions)
}

/// The line's first whitespace-separated word and what follows it; `None` for a blank line.
fn first_word(line: &str) -> Option<(&str, &str)> {
    let trimmed = line.trim_start();
    let end = trimmed
        .find(|c: char| c.is_ascii_whitespace())
        .unwrap_or(trimmed.len());
    (end > 0).then(|| (&trimmed[..end], &trimmed[end..]))
}

/// The arguments after a URI, into the burst's last request (and the burst's think time).
fn args<'a>(
    mut rest: &'a str,
    mut line: usize,
    lines: &mut impl Iterator<Item = (usize, &'a str)>,
    burst: &mut Burst,
) -> Result<(), WsesslogError> {
    while let Some((arg, after)) = first_word(rest) {
        let request = burst.requests.last_mut().expect("a burst holds a request");
        if let Some(method) = arg.strip_prefix("method=") {
            if !super::request::is_token(method) {
                return Err(WsesslogError::BadMethod {
                    line,
                    value: method.into(),
                });
            }
            request.method = method.to_ascii_uppercase();
            rest = after;
        } else if let Some(value) = arg.strip_prefix("think=") {
            let seconds = value
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s >= 0.0);
            let Some(seconds) = seconds.filter(|s| *s < 366.0 * 86_400.0) else {
                return Err(WsesslogError::BadThink {
                    line,
                    value: value.into(),
                });
            };
            burst.think = Some(Duration::from_secs_f64(seconds));
            rest = after;
        } else if arg.starts_with("contents=") {
            let from = rest.find("contents=").expect("the word is in the rest") + "contents=".len();
            let (body, left, at) = contents(&rest[from..], line, lines)?;
            request.body = body;
            (rest, line) = (left, at);
        } else {
            return Err(WsesslogError::UnknownArg {
                line,
                arg: arg.into(),
            });
        }
    }
    Ok(())
}

/// A `contents=` value from its first byte: its bytes, what of its (last) line follows it, and that
/// line's number.
fn contents<'a>(
    mut text: &'a str,
    mut line: usize,
    lines: &mut impl Iterator<Item = (usize, &'a str)>,
) -> Result<(Vec<u8>, &'a str, usize), WsesslogError> {
    let mut out = Vec::new();
    let mut quote: Option<char> = None;
    'line: loop {
        let mut chars = text.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next().map(|(_, c)| c) {
                    Some('n') => out.push(b'\n'),
                    Some('r') => out.push(b'\r'),
                    Some('t') => out.push(b'\t'),
                    Some('\n') | None => {
                        // A backslash ending the line: the value goes on with the next one.
                        out.push(b'\n');
                        let Some((next, raw)) = lines.next() else {
                            return Err(WsesslogError::Unfinished { line });
                        };
                        (text, line) = (raw, next);
                        continue 'line;
                    }
                    Some(other) => push_char(&mut out, other),
                },
                q @ ('\'' | '"') if quote == Some(q) => quote = None,
                q @ ('\'' | '"') if quote.is_none() => quote = Some(q),
                c if c.is_ascii_whitespace() && quote.is_none() => {
                    return Ok((out, &text[i..], line));
                }
                '\n' => return Err(WsesslogError::Unclosed { line }),
                c => push_char(&mut out, c),
            }
        }
        // The file's last line, without a line break.
        return match quote {
            Some(_) => Err(WsesslogError::Unclosed { line }),
            None => Ok((out, "", line)),
        };
    }
}

fn push_char(out: &mut Vec<u8>, c: char) {
    let mut buf = [0; 4];
    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, uri: &str, body: &str) -> LoggedRequest {
        LoggedRequest {
            method: method.into(),
            uri: uri.into(),
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn sessions_bursts_and_arguments_read_as_httperf_reads_them() {
        let log = "# a comment\n\
                   /index.html think=2.5\n\
                   \t/style.css\n  /logo.png\n\
                   /login method=POST contents='user=ann&pass=x y'\n\
                   \n\n\
                   /search?q=a method=get think=0\n\
                   /cart method=PUT contents=\"{\\\"n\\\": 1}\\n\"\n";
        let sessions = parse(log).unwrap();
        assert_eq!(sessions.len(), 2);
        let first = &sessions[0];
        assert_eq!(first.requests(), 4);
        assert_eq!(first.bursts.len(), 2);
        assert_eq!(first.bursts[0].think, Some(Duration::from_millis(2500)));
        assert_eq!(
            first.bursts[0].requests,
            [
                req("GET", "/index.html", ""),
                req("GET", "/style.css", ""),
                req("GET", "/logo.png", "")
            ]
        );
        assert_eq!(first.bursts[1].think, None);
        assert_eq!(
            first.bursts[1].requests,
            [req("POST", "/login", "user=ann&pass=x y")]
        );
        let second = &sessions[1];
        assert_eq!(second.bursts[0].requests, [req("GET", "/search?q=a", "")]);
        assert_eq!(second.bursts[0].think, Some(Duration::ZERO));
        assert_eq!(
            second.bursts[1].requests,
            [req("PUT", "/cart", "{\"n\": 1}\n")]
        );
    }

    #[test]
    fn a_backslash_at_a_line_s_end_continues_the_contents() {
        let sessions = parse("/post method=POST contents='a\\\nb' think=1\n/next\n").unwrap();
        assert_eq!(sessions[0].bursts[0].requests[0].body, b"a\nb");
        assert_eq!(sessions[0].bursts[0].think, Some(Duration::from_secs(1)));
        assert_eq!(sessions[0].bursts[1].requests[0].uri, "/next");
    }

    #[test]
    fn an_indented_first_line_still_starts_the_session_s_first_burst() {
        let sessions = parse("\n  /a\n  /b\n\n/c").unwrap();
        assert_eq!(sessions.len(), 2);
        assert_eq!(sessions[0].bursts.len(), 1);
        assert_eq!(sessions[0].requests(), 2);
        assert_eq!(sessions[1].bursts[0].requests[0].uri, "/c");
    }

    #[test]
    fn a_bad_log_is_refused_by_its_line() {
        let e = |t: &str| parse(t).unwrap_err().to_string();
        assert!(e("/a\n/b size=3\n").starts_with("line 2: 'size=3' is not method="));
        assert_eq!(
            e("/a think=-1\n"),
            "line 1: think=-1 is not a number of seconds from 0 up"
        );
        assert!(e("/a think=soon\n").contains("think=soon"));
        assert!(e("/a method=P?ST\n").contains("line 1: method=P?ST"));
        assert_eq!(
            e("/a contents='open\n"),
            "line 1: the contents' quote is never closed"
        );
        assert!(e("/a contents=x\\\n").contains("past the file's end"));
        assert_eq!(e("# only a comment\n\n"), WsesslogError::Empty.to_string());
    }
}
