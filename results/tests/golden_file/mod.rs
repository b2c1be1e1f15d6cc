//! One golden file's check, shared by the results crate's golden tests: `fresh` must equal
//! `tests/golden/NAME` byte for byte; `STAMPEDE_BLESS=1` rewrites it instead.
use std::path::Path;

/// Checks `fresh` against `tests/golden/{name}`; `made_by` says what makes it, `test` is the test
/// target that regenerates it.
pub fn check(name: &str, fresh: &str, made_by: &str, test: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("STAMPEDE_BLESS").is_some() {
        std::fs::write(&path, fresh).unwrap();
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
            "results/tests/golden/{name} is not what {made_by} makes (first difference: \
             {differs}); regenerate it with:\n    \
             STAMPEDE_BLESS=1 cargo test -p results --test {test}"
        );
    }
}
