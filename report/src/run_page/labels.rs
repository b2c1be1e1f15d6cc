//! The words the run's charts name the step value and a step by: the step-value axis's title and
//! a step's hover title, the same on the charts against the load and on the search's chart.
use results::run_file::RunFile;
use results::step::{StepResult, step_value};
use shared::plan::LoadModel;

/// What a step value is, as an axis names it.
pub(crate) fn unit_label(model: LoadModel) -> String {
    match model {
        LoadModel::Connections => "offered (new connections/s)",
        LoadModel::Requests => "offered (requests/s)",
        LoadModel::Concurrency => "connections (closed loop)",
    }
    .to_string()
}

/// `step 3 · 300 req/s: degraded: reason; reason`.
pub(crate) fn shade_title(run: &RunFile, s: &StepResult) -> String {
    let mut t = format!(
        "step {} · {}: {}",
        s.number,
        step_value(run.model().name(), s.step_value),
        s.trust.name()
    );
    if !s.reasons.is_empty() {
        t.push_str(": ");
        t.push_str(&s.reasons.join("; "));
    }
    t
}
