//! compare.json made from two fixed runs (the golden /3 run and the /2 fixture) is the golden
//! `tests/golden/compare.json`, byte for byte. Regenerate it with
//! `STAMPEDE_BLESS=1 cargo test -p results --test compare_golden`.
mod golden_file;
use std::path::Path;

use results::compare::{self, Labelled, Threshold};
use results::run_file::RunFile;

fn run(rel: &str, label: &str) -> Labelled {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    Labelled {
        label: label.to_string(),
        source: rel.trim_end_matches("/run.json").to_string(),
        run: RunFile::read(&path).expect("a fixed run.json reads"),
    }
}

#[test]
fn compare_json_of_two_fixed_runs_is_the_golden() {
    let runs = vec![
        run("tests/fixtures/run-v2/run.json", "before"),
        run("tests/golden/run.json", "after"),
    ];
    let comparison = compare::compare(runs, None, Threshold::default()).expect("they compare");
    let fresh = comparison.to_json() + "\n";
    golden_file::check("compare.json", &fresh, "compare", "compare_golden");
}
