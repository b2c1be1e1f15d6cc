//! `stampede summary DIR...`: results directories as Markdown, for a CI job's step summary
//! (`$GITHUB_STEP_SUMMARY`) or a pull request comment, so the GitHub action's shell only pipes it.
//! Every sentence in it is one stdout already printed (the headline, the knee's cause, the
//! capacity's answer, a breach's sentence, the step table, the ranking), read back from run.json.
use std::path::PathBuf;

use results::compare::{self, Threshold};
use results::run_file::{RunFile, RunFileError, RunStatus};
use results::step::step_value;

#[derive(Debug, thiserror::Error)]
pub enum SummaryError {
    #[error(transparent)]
    Read(#[from] RunFileError),
    #[error("{0}: no run.json in it nor in a directory inside it")]
    Empty(PathBuf),
    #[error(transparent)]
    Compare(#[from] compare::CompareError),
}

/// The runs of `dirs` (each a results directory, a run.json, or a side-by-side run's directory
/// holding one per target) as Markdown: a block per run, then, for several runs, their ranking
/// with the first as the baseline.
pub fn markdown(dirs: &[PathBuf]) -> Result<String, SummaryError> {
    let mut runs = Vec::new();
    for dir in dirs {
        let found = crate::history::run_files(dir);
        if found.is_empty() {
            return Err(SummaryError::Empty(dir.clone()));
        }
        for path in found {
            let run = RunFile::read(&path)?;
            runs.push(crate::history::labelled(&path, run));
        }
    }
    let mut out = String::new();
    for r in &runs {
        out.push_str(&block(&r.label, &r.run));
    }
    if runs.len() > 1 {
        let c = compare::compare(runs, None, Threshold::default())?;
        out.push_str(&format!(
            "### Ranking\n\n```text\n{}```\n\n",
            crate::compare::ranking(&c)
        ));
    }
    Ok(out)
}

/// One run: its answer, knee, capacity, --fail-on verdicts and its step table.
fn block(label: &str, run: &RunFile) -> String {
    let mut out = format!("### stampede: {label} ({})\n\n", run.target);
    if run.status != RunStatus::Completed {
        out.push_str(&format!("- **status:** {}\n", run.status));
    }
    if let Some(s) = &run.summary {
        out.push_str(&format!("- **answer:** {}\n", s.headline));
        if let Some(k) = &s.knee {
            let model = run.steps.first().map_or("", |s| s.model.as_str());
            out.push_str(&format!(
                "- **knee:** step {} ({}), {}\n",
                k.step,
                step_value(model, k.step_value),
                k.cause.words()
            ));
        }
    }
    if let Some(c) = &run.capacity {
        out.push_str(&format!(
            "- **capacity:** {} (status `{}`, exit {})\n",
            c.answer,
            c.status.name(),
            c.exit_code
        ));
    }
    for (expression, said) in run.fail_on_verdicts() {
        match said.is_empty() {
            true => out.push_str(&format!("- ✅ `--fail-on {expression}` held\n")),
            false => {
                for s in said {
                    out.push_str(&format!("- ❌ {s}\n"));
                }
            }
        }
    }
    let table = crate::progress::table_after(run.warmup.as_ref(), &run.steps, &[]);
    out.push_str(&format!(
        "\n<details><summary>{} step{}</summary>\n\n```text\n{table}```\n\n</details>\n\n",
        run.steps.len(),
        if run.steps.len() == 1 { "" } else { "s" }
    ));
    out
}
