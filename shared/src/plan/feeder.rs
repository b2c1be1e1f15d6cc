//! The data a run's requests draw on: CSV feeders (their names, columns and how their rows are dealt)
//! and a setup request run once per connection, whose extractions fill variables; how a feeder's rows
//! are dealt among agents and workers (`Dealer`), and the bytes a row travels and is spooled in.
use super::{Extraction, PlanError, RequestSpec};

/// How a feeder's rows are used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FeederMode {
    /// every row used at most once across the whole fleet; then requests needing one are not sent
    Shard,
    /// every agent gets every row and uses them in order, wrapping
    Copy,
    /// dealt as shard, each part used again from its start when it ends
    Circular,
    /// a uniformly random row per request (every agent gets every row)
    Random,
}

impl FeederMode {
    pub fn name(self) -> &'static str {
        match self {
            FeederMode::Shard => "shard",
            FeederMode::Copy => "copy",
            FeederMode::Circular => "circular",
            FeederMode::Random => "random",
        }
    }

    /// Whether an agent gets every row (else the rows are dealt among agents).
    pub fn every_agent_all(self) -> bool {
        matches!(self, FeederMode::Copy | FeederMode::Random)
    }

    /// Whether a worker starts its rows again after the last (shard alone does not).
    pub fn wraps(self) -> bool {
        self != FeederMode::Shard
    }
}

/// A CSV feeder as the agents know it: its rows come over the control link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feeder {
    name: String,
    mode: FeederMode,
    columns: Vec<String>,
}

impl Feeder {
    pub fn try_new(name: &str, mode: FeederMode, columns: Vec<String>) -> Result<Self, PlanError> {
        if !super::is_variable_name(name) {
            return Err(PlanError::BadData(format!(
                "feeder name '{name}' is not a name (letters, digits, '_', '-', '.')"
            )));
        }
        if columns.is_empty() {
            return Err(PlanError::BadData(format!("feeder {name} has no columns")));
        }
        if let Some(c) = columns.iter().find(|c| !super::is_variable_name(c)) {
            return Err(PlanError::BadData(format!(
                "feeder {name}: '{c}' is not a variable name"
            )));
        }
        Ok(Feeder {
            name: name.into(),
            mode,
            columns,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn mode(&self) -> FeederMode {
        self.mode
    }

    /// The variables it fills, its CSV header's order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }
}

/// A request run once per connection before its first request of the mix, whose reply fills
/// variables the mix uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    request: RequestSpec,
    extract: Vec<Extraction>,
}

impl Setup {
    pub fn new(request: RequestSpec, extract: Vec<Extraction>) -> Setup {
        Setup { request, extract }
    }

    pub fn request(&self) -> &RequestSpec {
        &self.request
    }

    pub fn extract(&self) -> &[Extraction] {
        &self.extract
    }
}

/// The run's variables and where they come from: feeders' columns first, in feeder order, then the
/// setup's extractions. A template's variable index is its place in [`Data::variables`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Data {
    feeders: Vec<Feeder>,
    setup: Option<Setup>,
}

/// The most feeders a run may have.
pub const MAX_FEEDERS: usize = 16;

impl Data {
    /// Checks that every variable is defined once across the feeders and the setup.
    pub fn try_new(feeders: Vec<Feeder>, setup: Option<Setup>) -> Result<Data, PlanError> {
        if feeders.len() > MAX_FEEDERS {
            return Err(PlanError::BadData(format!(
                "{} feeders: at most {MAX_FEEDERS}",
                feeders.len()
            )));
        }
        let data = Data { feeders, setup };
        let mut seen: Vec<(&str, String)> = Vec::new();
        for (var, from) in data.sources() {
            if let Some((_, first)) = seen.iter().find(|(v, _)| *v == var) {
                return Err(PlanError::BadData(format!(
                    "variable '{var}' is defined twice: by {first} and by {from}"
                )));
            }
            seen.push((var, from));
        }
        Ok(data)
    }

    fn sources(&self) -> impl Iterator<Item = (&str, String)> {
        let fed = self.feeders.iter().flat_map(|f| {
            f.columns
                .iter()
                .map(|c| (c.as_str(), format!("feeder {}", f.name)))
        });
        let set = self
            .setup
            .iter()
            .flat_map(|s| s.extract.iter().map(|e| (e.var(), "the setup".to_string())));
        fed.chain(set)
    }

    pub fn is_empty(&self) -> bool {
        self.feeders.is_empty() && self.setup.is_none()
    }

    pub fn feeders(&self) -> &[Feeder] {
        &self.feeders
    }

    pub fn setup(&self) -> Option<&Setup> {
        self.setup.as_ref()
    }

    /// Every variable, in index order.
    pub fn variables(&self) -> Vec<&str> {
        self.sources().map(|(v, _)| v).collect()
    }

    /// The index of feeder `f`'s first column among the variables.
    pub fn first_of(&self, f: usize) -> usize {
        self.feeders[..f].iter().map(|f| f.columns.len()).sum()
    }

    /// The index of the setup's first extraction among the variables.
    pub fn first_extracted(&self) -> usize {
        self.feeders.iter().map(|f| f.columns.len()).sum()
    }

    /// Which feeder fills variable `var`, if a feeder does.
    pub fn feeder_of(&self, var: usize) -> Option<usize> {
        let mut first = 0;
        for (i, f) in self.feeders.iter().enumerate() {
            if var < first + f.columns.len() {
                return Some(i);
            }
            first += f.columns.len();
        }
        None
    }
}

/// Deals items one at a time to parties in proportion to their weights, smoothly (nginx's smooth
/// weighted round robin): over any run of items each party's count is within one of its share.
#[derive(Debug, Clone)]
pub struct Dealer {
    weights: Vec<i64>,
    current: Vec<i64>,
    total: i64,
}

impl Dealer {
    /// `None` when no weight is positive.
    pub fn new(weights: &[u64]) -> Option<Dealer> {
        let weights: Vec<i64> = weights
            .iter()
            .map(|&w| w.min(i64::MAX as u64 / 1024) as i64)
            .collect();
        let total = weights.iter().try_fold(0i64, |a, &w| a.checked_add(w))?;
        (total > 0).then(|| Dealer {
            current: vec![0; weights.len()],
            weights,
            total,
        })
    }

    /// The party the next item goes to.
    pub fn next_party(&mut self) -> usize {
        let mut best = 0;
        for (i, w) in self.weights.iter().enumerate() {
            self.current[i] += w;
            if self.current[i] > self.current[best] {
                best = i;
            }
        }
        self.current[best] -= self.total;
        best
    }
}

/// Largest row a feeder may have, its fields' bytes and lengths together (a CSV row of more is
/// refused before any load): a message of rows stays far below the control link's 4 MiB.
pub const MAX_ROW: usize = 1 << 20;

/// Largest field a row may carry.
pub const MAX_FIELD: usize = MAX_ROW;

/// The bytes `fields` take as a row travels (see [`encode_row`]).
pub fn row_len(fields: &[Vec<u8>]) -> usize {
    fields.iter().map(|f| 4 + f.len()).sum()
}

/// Appends a row as it travels and is spooled: each field its length (u32, little-endian) and bytes.
pub fn encode_row(fields: &[Vec<u8>], out: &mut Vec<u8>) {
    for f in fields {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
}

/// Splits rows of `columns` fields off the front of `bytes`: each row's fields, in order. An error
/// says what is wrong (a length past the end, a field too long), for a chunk a peer sent.
pub fn decode_rows(
    mut bytes: &[u8],
    columns: usize,
    mut each: impl FnMut(&[&[u8]]),
) -> Result<u64, String> {
    let mut rows = 0;
    let mut fields: Vec<&[u8]> = Vec::with_capacity(columns);
    while !bytes.is_empty() {
        fields.clear();
        for _ in 0..columns {
            let Some((len, rest)) = bytes.split_first_chunk::<4>() else {
                return Err(format!("row {} is cut short", rows + 1));
            };
            let len = u32::from_le_bytes(*len) as usize;
            if len > MAX_FIELD || len > rest.len() {
                return Err(format!("row {} has a field of {len} bytes", rows + 1));
            }
            fields.push(&rest[..len]);
            bytes = &rest[len..];
        }
        each(&fields);
        rows += 1;
    }
    Ok(rows)
}

#[cfg(test)]
mod tests;
