//! A capacity search's mark on a step (run.json's `steps[].probe`, steps.tsv's `role` and `class`):
//! plain data below both the step's result and the search, which makes the marks.
use serde::{Deserialize, Serialize};

/// What a probe is for, as steps.tsv and run.json name it. `Warmup` is the coordinator's: a probe
/// at the start rate before the search, which the search never sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Warmup,
    Ramp,
    Bisect,
    Confirm,
    Recovery,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Warmup => "warmup",
            Role::Ramp => "ramp",
            Role::Bisect => "bisect",
            Role::Confirm => "confirm",
            Role::Recovery => "recovery",
        }
    }
}

/// A probe's class as the files name it; `aborted` for a probe cut short (Ctrl-C), which the
/// search never counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    Pass,
    Fail,
    Invalid,
    Undecided,
    Aborted,
}

impl Mark {
    pub fn name(self) -> &'static str {
        match self {
            Mark::Pass => "pass",
            Mark::Fail => "fail",
            Mark::Invalid => "invalid",
            Mark::Undecided => "undecided",
            Mark::Aborted => "aborted",
        }
    }
}

/// One step's part in a search: what it was for, how it was classed, and why when it failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeMark {
    pub role: Role,
    pub class: Mark,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
