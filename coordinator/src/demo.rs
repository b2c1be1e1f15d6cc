//! `stampede demo`: the reference target with a known knee, an embedded agent, a short ramp past the knee.
use std::time::Duration;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use shared::plan::LoadModel;

use crate::cli::{DemoArgs, RunArgs};
use crate::config;
use crate::run::{self, RunError, RunOutcome, Stop};
use crate::serve::{self, ServeConfig};

/// The demo target's capacity (req/s): the ramp crosses it.
pub const DEMO_CAPACITY: f64 = 400.0;

pub async fn run(args: DemoArgs, shutdown: Stop) -> Result<RunOutcome, RunError> {
    let target_stop = CancellationToken::new();
    let (addr, _task) = serve::start(
        ServeConfig {
            listen: "127.0.0.1:0".parse().expect("constant address"),
            delay: Duration::from_millis(1),
            capacity: Some(DEMO_CAPACITY),
            wedge_after: None,
            body: Bytes::from_static(b"I am a stupid HTTP server!\n"),
            tls: false,
            max_streams: 200,
            ready_file: None,
        },
        target_stop.clone(),
    )
    .await
    .map_err(|e| RunError::Config(config::ConfigError::Conflict(e.to_string())))?;
    if !args.quiet {
        eprintln!(
            "stampede demo: reference target on http://{addr}/ serving at most {DEMO_CAPACITY} req/s; ramping the requests model from 100 to 600 req/s; a server monitor watches this process (pid {}: the target, and the generator beside it)",
            std::process::id()
        );
    }
    let cfg = config::resolve(RunArgs {
        plan_or_url: vec![format!("http://{addr}/")],
        model: Some(LoadModel::Requests),
        low_rate: Some(100.0),
        high_rate: Some(600.0),
        rate_step: Some(100.0),
        step_duration: Some(args.step_duration),
        timeout: Some(Duration::from_secs(2).into()),
        out: args.out,
        quiet: args.quiet,
        // The target serves from this process's runtime, beside the embedded agent: no pid is the
        // target's alone, so the monitor watches the whole process (the run says they share a host).
        monitor_pid: Some(std::process::id()),
        ..RunArgs::default()
    })?;
    let outcome = run::run(cfg, shutdown).await;
    target_stop.cancel();
    outcome
}
