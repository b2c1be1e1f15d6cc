//! A Node.js script as a server for a test: started with `node -e`, its first line of output (the
//! port or ports it listens on) read back, killed when dropped. Without node the test skips, except
//! under CI=true, where .ci/run installs it.
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

pub struct NodeScript {
    pub child: Child,
    /// The script's first line of output.
    pub said: String,
}

impl NodeScript {
    pub fn start(test: &str, script: &str) -> Option<NodeScript> {
        let child = Command::new("node")
            .args(["-e", script])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "{test}: CI=true requires node ({e})"
                );
                eprintln!("SKIPPED {test}: no node on this machine ({e})");
                return None;
            }
        };
        let mut said = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut said)
            .expect("node prints its ports");
        Some(NodeScript { child, said })
    }
}

impl Drop for NodeScript {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
