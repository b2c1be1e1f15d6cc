//! Which reply statuses count as served (`--ok-status`), and the per-code reply counts that name the
//! others in a step's notes ("33 % of replies were 503").
use std::fmt;

/// The lowest and highest status code a reply can carry; anything else is not an HTTP reply.
pub const LOWEST: u16 = 100;
pub const HIGHEST: u16 = 599;
const CODES: usize = (HIGHEST - LOWEST + 1) as usize;

/// A bad `--ok-status` value, with the part that is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad --ok-status '{input}': {why} (write codes and ranges separated by commas, e.g. 200-399 or 200,201,404)"
)]
pub struct StatusSetError {
    pub input: String,
    pub why: String,
}

/// Expected reply statuses as inclusive ranges: k6's expected statuses, wrk's "non-2xx or 3xx".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusSet {
    ranges: Vec<(u16, u16)>,
}

impl Default for StatusSet {
    /// 200-399, as k6 and wrk count success.
    fn default() -> Self {
        StatusSet {
            ranges: vec![(200, 399)],
        }
    }
}

impl StatusSet {
    /// Parses `200-399`, `200,204,300-302`; every code within 100..=599.
    pub fn parse(input: &str) -> Result<StatusSet, StatusSetError> {
        let err = |why: String| StatusSetError {
            input: input.to_string(),
            why,
        };
        let code = |s: &str| -> Result<u16, StatusSetError> {
            let s = s.trim();
            if s.is_empty() {
                return Err(err("an empty code".to_string()));
            }
            match s.parse::<u16>() {
                Ok(c) if (LOWEST..=HIGHEST).contains(&c) => Ok(c),
                _ => Err(err(format!(
                    "'{s}' is not a status code from {LOWEST} to {HIGHEST}"
                ))),
            }
        };
        let mut ranges = Vec::new();
        for part in input.split(',') {
            let range = match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (code(a)?, code(b)?);
                    if a > b {
                        return Err(err(format!("the range {a}-{b} runs backwards")));
                    }
                    (a, b)
                }
                None => {
                    let c = code(part)?;
                    (c, c)
                }
            };
            ranges.push(range);
        }
        Ok(StatusSet { ranges })
    }

    /// Builds a set from ranges already checked elsewhere (the wire); `None` if one is out of range.
    pub fn from_ranges(ranges: Vec<(u16, u16)>) -> Option<StatusSet> {
        let ok = !ranges.is_empty()
            && ranges
                .iter()
                .all(|&(a, b)| LOWEST <= a && a <= b && b <= HIGHEST);
        ok.then_some(StatusSet { ranges })
    }

    pub fn ranges(&self) -> &[(u16, u16)] {
        &self.ranges
    }

    pub fn contains(&self, code: u16) -> bool {
        self.ranges.iter().any(|&(a, b)| a <= code && code <= b)
    }
}

impl fmt::Display for StatusSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(a, b)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if a == b {
                write!(f, "{a}")?;
            } else {
                write!(f, "{a}-{b}")?;
            }
        }
        Ok(())
    }
}

/// Replies counted per status code. One fixed array, so recording costs an index and an add.
#[derive(Clone, PartialEq, Eq)]
pub struct StatusCodes(Box<[u64; CODES]>);

impl Default for StatusCodes {
    fn default() -> Self {
        StatusCodes(Box::new([0; CODES]))
    }
}

impl fmt::Debug for StatusCodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.nonzero()).finish()
    }
}

impl StatusCodes {
    /// Counts one reply; codes outside 100..=599 are not counted here (they are `other` errors).
    pub fn record(&mut self, code: u16) {
        if (LOWEST..=HIGHEST).contains(&code) {
            self.0[usize::from(code - LOWEST)] += 1;
        }
    }

    /// Adds `n` replies of `code`; false if the code is not a status code.
    pub fn add_count(&mut self, code: u16, n: u64) -> bool {
        if !(LOWEST..=HIGHEST).contains(&code) {
            return false;
        }
        // Counts come from the network: a hostile peer's cannot overflow into a panic.
        let slot = &mut self.0[usize::from(code - LOWEST)];
        *slot = slot.saturating_add(n);
        true
    }

    pub fn add(&mut self, o: &StatusCodes) {
        for (a, b) in self.0.iter_mut().zip(o.0.iter()) {
            *a = a.saturating_add(*b);
        }
    }

    pub fn get(&self, code: u16) -> u64 {
        if (LOWEST..=HIGHEST).contains(&code) {
            self.0[usize::from(code - LOWEST)]
        } else {
            0
        }
    }

    /// The codes seen, in ascending order, with their counts: the sparse form sent on the wire.
    pub fn nonzero(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.0
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| (LOWEST + i as u16, *n))
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|n| *n == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_200_to_399() {
        let s = StatusSet::default();
        assert!(s.contains(200) && s.contains(304) && s.contains(399));
        assert!(!s.contains(199) && !s.contains(400) && !s.contains(503));
        assert_eq!(s.to_string(), "200-399");
    }

    #[test]
    fn lists_and_ranges_parse_and_print_back() {
        let s = StatusSet::parse("200, 204,300-302,404").unwrap();
        assert!(s.contains(404) && s.contains(301) && !s.contains(303));
        assert_eq!(s.to_string(), "200,204,300-302,404");
        assert_eq!(StatusSet::parse(&s.to_string()).unwrap(), s);
    }

    #[test]
    fn bad_sets_say_which_part_is_wrong() {
        for (input, why) in [
            ("2xx", "'2xx' is not a status code"),
            ("200-", "an empty code"),
            ("200,,300", "an empty code"),
            ("399-200", "the range 399-200 runs backwards"),
            ("700", "'700' is not a status code from 100 to 599"),
        ] {
            let e = StatusSet::parse(input).unwrap_err().to_string();
            assert!(e.contains(why), "{input}: {e}");
            assert!(e.starts_with(&format!("bad --ok-status '{input}'")), "{e}");
        }
        assert!(StatusSet::from_ranges(vec![(200, 100)]).is_none());
        assert!(StatusSet::from_ranges(vec![]).is_none());
    }

    #[test]
    fn codes_count_and_merge_sparsely() {
        let mut a = StatusCodes::default();
        a.record(503);
        a.record(503);
        a.record(200);
        a.record(42);
        let mut b = StatusCodes::default();
        assert!(b.add_count(503, 3));
        assert!(!b.add_count(600, 1));
        a.add(&b);
        assert_eq!(a.nonzero().collect::<Vec<_>>(), [(200, 1), (503, 5)]);
        assert_eq!(a.get(503), 5);
    }
}
