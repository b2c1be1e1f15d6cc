//! The `stampede` binary: parse, set up logging and the runtime, run the command, map it to an exit code.
use std::io::IsTerminal;
use std::process::ExitCode;

use coordinator::cli::Command;
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    let cli = match coordinator::cli::parse_from(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) if shared::usage::is_display(&e) => e.exit(),
        Err(e) => {
            eprintln!(
                "stampede: {}",
                shared::usage::one_line(&e, coordinator::cli::habit_hint)
            );
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        // Colour codes only for a person at a terminal, not in a log file or a pipe.
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STAMPEDE_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    agent::install_crypto_provider();
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Command::Serve(s) = &cli.command
        && let Some(n) = s.threads
    {
        rt.worker_threads(n.max(1));
    }
    let rt = match rt.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("stampede: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = rt.block_on(async {
        let shutdown = CancellationToken::new();
        let on_signal = shutdown.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            eprintln!("stampede: interrupted; stopping the running step");
            on_signal.cancel();
        });
        coordinator::execute(cli.command, shutdown).await
    });
    ExitCode::from(code)
}

async fn wait_for_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
