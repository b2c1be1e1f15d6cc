//! Writes docs/reference's JSON Schemas from the types (`cargo run -p results --example schemas
//! --features schema -- docs/reference`); tests/tests/schemas.rs checks the committed ones are these.
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: schemas DIR (docs/reference)");
        return ExitCode::from(2);
    };
    for (name, text) in results::schema::files() {
        let path = dir.join(name);
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("{}", path.display());
    }
    ExitCode::SUCCESS
}
