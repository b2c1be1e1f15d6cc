//! Sessions as the connections model runs them (httperf's `--wsesslog`): each arrival opens one
//! connection and runs one session of bursts, a think time after each. A session names its requests
//! by their index in the workload's list, so each distinct request is compiled and sent once per run
//! however many sessions repeat it, and the wire carries a session as a few numbers.
use std::time::Duration;

use super::PlanError;
use super::wsesslog::{LoggedRequest, LoggedSession};

/// The most sessions a run takes: a log longer than this is a data set, not a workload.
pub const MAX_SESSIONS: usize = 100_000;
/// The most requests one session holds.
pub const MAX_SESSION_REQUESTS: usize = 10_000;
/// The longest think time: longer is a typo (httperf's are seconds).
pub const MAX_THINK: Duration = Duration::from_secs(3600);

/// Requests sent together (the first, then the others once its reply is in), then a pause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionBurst {
    requests: Vec<u16>,
    think: Duration,
}

impl SessionBurst {
    /// The burst's requests, as indexes into the workload's requests; at least one.
    pub fn requests(&self) -> &[u16] {
        &self.requests
    }

    /// The pause after its last reply, before the next burst.
    pub fn think(&self) -> Duration {
        self.think
    }
}

/// One session: its bursts in order, at least one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    bursts: Vec<SessionBurst>,
}

impl Session {
    pub fn bursts(&self) -> &[SessionBurst] {
        &self.bursts
    }

    /// How many requests it sends.
    pub fn requests(&self) -> usize {
        self.bursts.iter().map(|b| b.requests.len()).sum()
    }
}

/// What is wrong with a list of sessions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionsError {
    #[error("no session: a session log holds at least one")]
    Empty,
    #[error("{0} sessions; at most {MAX_SESSIONS}")]
    TooMany(usize),
    #[error("session {session} has a burst without a request")]
    EmptyBurst { session: usize },
    #[error("session {session} has {found} requests; at most {MAX_SESSION_REQUESTS}")]
    TooLong { session: usize, found: usize },
    #[error("session {session} names request {index}, past the {count} requests of the workload")]
    NoSuchRequest {
        session: usize,
        index: u32,
        count: usize,
    },
    #[error("session {session} thinks {think:?} after a burst; at most an hour")]
    ThinkTooLong { session: usize, think: Duration },
    #[error("{0} distinct requests; a session log holds at most {max}", max = u16::MAX)]
    TooManyRequests(usize),
}

/// Said as a plan's error in its words (`PlanError` keeps no type of this file: the plan's files
/// take their errors from it).
impl From<SessionsError> for PlanError {
    fn from(e: SessionsError) -> PlanError {
        PlanError::Sessions(e.to_string())
    }
}

/// The run's sessions, in the log's order: arrival `g` of a step runs session `g % len`, so a fleet
/// sends the log's sessions in turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sessions {
    list: Vec<Session>,
}

impl Sessions {
    /// Checks sessions given as bursts of (request indexes, think time) against a workload of
    /// `request_count` requests (what the wire carries).
    pub fn try_new(
        sessions: Vec<Vec<(Vec<u32>, Duration)>>,
        request_count: usize,
    ) -> Result<Sessions, SessionsError> {
        if sessions.is_empty() {
            return Err(SessionsError::Empty);
        }
        if sessions.len() > MAX_SESSIONS {
            return Err(SessionsError::TooMany(sessions.len()));
        }
        let mut list = Vec::with_capacity(sessions.len());
        for (i, bursts) in sessions.into_iter().enumerate() {
            let session = i + 1;
            let found: usize = bursts.iter().map(|(r, _)| r.len()).sum();
            if found > MAX_SESSION_REQUESTS {
                return Err(SessionsError::TooLong { session, found });
            }
            let mut out = Vec::with_capacity(bursts.len());
            for (requests, think) in bursts {
                if requests.is_empty() {
                    return Err(SessionsError::EmptyBurst { session });
                }
                if think > MAX_THINK {
                    return Err(SessionsError::ThinkTooLong { session, think });
                }
                let requests = requests
                    .into_iter()
                    .map(|index| {
                        u16::try_from(index)
                            .ok()
                            .filter(|i| usize::from(*i) < request_count)
                            .ok_or(SessionsError::NoSuchRequest {
                                session,
                                index,
                                count: request_count,
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                out.push(SessionBurst { requests, think });
            }
            if out.is_empty() {
                return Err(SessionsError::EmptyBurst { session });
            }
            list.push(Session { bursts: out });
        }
        Ok(Sessions { list })
    }

    /// A parsed session log as the workload's distinct requests (in order of first use) and the
    /// sessions naming them; a burst the log leaves without `think=` thinks `default_think`
    /// (httperf's X).
    pub fn from_log(
        log: &[LoggedSession],
        default_think: Duration,
    ) -> Result<(Vec<LoggedRequest>, Sessions), SessionsError> {
        let mut distinct: Vec<LoggedRequest> = Vec::new();
        let mut index = std::collections::HashMap::<&LoggedRequest, u32>::new();
        let mut sessions = Vec::with_capacity(log.len());
        for session in log {
            let mut bursts = Vec::with_capacity(session.bursts.len());
            for burst in &session.bursts {
                let mut requests = Vec::with_capacity(burst.requests.len());
                for r in &burst.requests {
                    let i = *index.entry(r).or_insert_with(|| {
                        distinct.push(r.clone());
                        (distinct.len() - 1) as u32
                    });
                    requests.push(i);
                }
                bursts.push((requests, burst.think.unwrap_or(default_think)));
            }
            sessions.push(bursts);
        }
        if distinct.len() > usize::from(u16::MAX) {
            return Err(SessionsError::TooManyRequests(distinct.len()));
        }
        let sessions = Sessions::try_new(sessions, distinct.len())?;
        Ok((distinct, sessions))
    }

    /// The sessions, in order; at least one.
    pub fn list(&self) -> &[Session] {
        &self.list
    }

    /// The session arrival `g` of a step runs.
    pub fn of_arrival(&self, g: u64) -> &Session {
        &self.list[(g % self.list.len() as u64) as usize]
    }

    /// The requests a session sends on average: what arrivals bring in the long run, as each
    /// session of the log comes in turn.
    pub fn mean_requests(&self) -> f64 {
        let all: usize = self.list.iter().map(Session::requests).sum();
        all as f64 / self.list.len() as f64
    }

    /// The most requests one session sends: what an arrival may bring.
    pub fn max_requests(&self) -> usize {
        self.list.iter().map(Session::requests).max().unwrap_or(1)
    }

    /// Checks that every request named is one of a workload of `count` requests.
    pub(super) fn fits(&self, count: usize) -> Result<(), SessionsError> {
        for (i, s) in self.list.iter().enumerate() {
            let past = s
                .bursts
                .iter()
                .flat_map(|b| &b.requests)
                .find(|r| usize::from(**r) >= count);
            if let Some(&index) = past {
                return Err(SessionsError::NoSuchRequest {
                    session: i + 1,
                    index: index.into(),
                    count,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::parse_wsesslog;

    #[test]
    fn a_log_becomes_distinct_requests_and_sessions_that_name_them() {
        let log = parse_wsesslog(
            "/a think=0.5\n  /b\n/c method=POST contents='x'\n\n/a\n/c method=POST contents='x'\n",
        )
        .unwrap();
        let (requests, s) = Sessions::from_log(&log, Duration::from_millis(50)).unwrap();
        let uris: Vec<_> = requests.iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(uris, ["/a", "/b", "/c"]);
        assert_eq!(s.list().len(), 2);
        let first = &s.list()[0];
        assert_eq!(first.bursts()[0].requests(), [0, 1]);
        assert_eq!(first.bursts()[0].think(), Duration::from_millis(500));
        // No think= on the line: the default.
        assert_eq!(first.bursts()[1].think(), Duration::from_millis(50));
        assert_eq!(s.list()[1].bursts()[1].requests(), [2]);
        assert_eq!(s.max_requests(), 3);
        assert_eq!(s.mean_requests(), 2.5);
        // Arrival g runs session g mod 2.
        assert_eq!(s.of_arrival(0), first);
        assert_eq!(s.of_arrival(3), &s.list()[1]);
    }

    #[test]
    fn what_the_wire_may_carry_is_checked() {
        let ms = Duration::from_millis;
        let ok = vec![vec![(vec![0, 1], ms(1))], vec![(vec![1], ms(0))]];
        assert!(Sessions::try_new(ok.clone(), 2).is_ok());
        assert_eq!(
            Sessions::try_new(ok, 1).unwrap_err().to_string(),
            "session 1 names request 1, past the 1 requests of the workload"
        );
        assert_eq!(
            Sessions::try_new(vec![], 1).unwrap_err(),
            SessionsError::Empty
        );
        assert_eq!(
            Sessions::try_new(vec![vec![(vec![], ms(1))]], 1).unwrap_err(),
            SessionsError::EmptyBurst { session: 1 }
        );
        assert_eq!(
            Sessions::try_new(vec![vec![]], 1).unwrap_err(),
            SessionsError::EmptyBurst { session: 1 }
        );
        assert!(matches!(
            Sessions::try_new(vec![vec![(vec![0], Duration::from_secs(7200))]], 1),
            Err(SessionsError::ThinkTooLong { session: 1, .. })
        ));
        assert!(matches!(
            Sessions::try_new(vec![vec![(vec![u32::MAX], ms(1))]], 1),
            Err(SessionsError::NoSuchRequest { .. })
        ));
        let long = vec![vec![(vec![0; MAX_SESSION_REQUESTS + 1], ms(1))]];
        assert!(matches!(
            Sessions::try_new(long, 1),
            Err(SessionsError::TooLong { session: 1, .. })
        ));
    }
}
