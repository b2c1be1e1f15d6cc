//! compare.tsv, shaped as autobench's two-host output: the joined value first (`dem_req_rate`, or
//! `connections`), then every run's steps.tsv columns suffixed with its label (`req_rate_nginx`, …,
//! `ok_rate_nginx`, …, `req_rate_app`, …), one row per step value, empty where a run has no such step.
//! bench2graph and gnuplot scripts that read autobench's columns read it unchanged.
//!
//! After the steps, the ranking: a blank line, then `#`-commented lines (searches' answers in one
//! line first, when the runs are searches), a head of [`ranking::COLUMNS`] and a row per run best
//! first, tab-separated after the `# `. gnuplot and
//! `awk '!/^#/'` skip it as comments; a reader that wants it strips the `# `.
use crate::table::StepTable;

use super::{Comparison, ranking};

impl Comparison {
    /// compare.tsv's text, a header line and one line per row, each ending in a newline.
    pub fn tsv(&self) -> String {
        let tables: Vec<StepTable> = self
            .inputs
            .iter()
            .map(|r| {
                let monitors: Vec<String> = r.run.monitors.iter().map(|m| m.name.clone()).collect();
                StepTable::labelled(&r.label, r.run.model()).with_labelled_monitors(
                    &monitors,
                    r.run.paired_monitor.as_deref(),
                    &r.label,
                )
            })
            .collect();
        let mut header = vec![self.axis.to_string()];
        for t in &tables {
            header.extend(t.header().into_iter().skip(1));
        }
        let mut out = header.join("\t") + "\n";
        for row in &self.steps {
            let mut first = None;
            let mut cells: Vec<String> = Vec::new();
            for ((input, table), step) in self.inputs.iter().zip(&tables).zip(&row.runs) {
                let result = step
                    .as_ref()
                    .and_then(|s| input.run.steps.iter().find(|r| r.number == s.step));
                match result {
                    Some(r) => {
                        let mut cols = table.row(r).into_iter();
                        // Every run's first cell of a row is the same (the rows join on it).
                        let value = cols.next();
                        first = first.or(value);
                        cells.extend(cols);
                    }
                    None => cells.extend((1..table.header().len()).map(|_| String::new())),
                }
            }
            out.push_str(&first.unwrap_or_default());
            for c in cells {
                out.push('\t');
                out.push_str(&c);
            }
            out.push('\n');
        }
        out.push_str("\n# ranking, best first\n");
        if let Some(line) = &self.max_under_slo {
            out.push_str(&format!("# {line}\n"));
        }
        out.push_str("# ");
        out.push_str(&ranking::COLUMNS.join("\t"));
        out.push('\n');
        for r in &self.ranking {
            out.push_str("# ");
            out.push_str(&r.tsv_cells().join("\t"));
            out.push('\n');
        }
        out
    }
}
