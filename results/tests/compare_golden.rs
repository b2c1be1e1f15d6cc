//! compare.json made from two fixed runs (the golden /3 run and the /2 fixture) is the golden
//! `tests/golden/compare.json`, byte for byte. Regenerate it with
//! `STAMPEDE_BLESS=1 cargo test -p results --test compare_golden`.
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
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/compare.json");
    if std::env::var_os("STAMPEDE_BLESS").is_some() {
        std::fs::write(&path, &fresh).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    if on_disk != fresh {
        let differs = on_disk
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .map_or_else(
                || "one is longer".to_string(),
                |i| format!("line {}", i + 1),
            );
        panic!(
            "results/tests/golden/compare.json is not what compare makes (first difference: \
             {differs}); regenerate it with:\n    \
             STAMPEDE_BLESS=1 cargo test -p results --test compare_golden"
        );
    }
}
