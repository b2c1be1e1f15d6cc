//! The worker threads: one per core by default, each a current-thread runtime that owns its connections,
//! started once per agent and handed one job per step.
use tokio::sync::mpsc;

use crate::worker::{self, Job};

pub struct Engine {
    jobs: Vec<mpsc::Sender<Job>>,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("cannot start worker thread {index}: {source}")]
    Spawn {
        index: usize,
        source: std::io::Error,
    },
    #[error("worker threads have stopped")]
    Stopped,
}

impl Engine {
    pub fn start(threads: usize) -> Result<Engine, EngineError> {
        // Before any connection: a default soft limit of 1024 would cap the load, not the target.
        crate::system::raise_fd_limit();
        let mut jobs = Vec::with_capacity(threads);
        for index in 0..threads.max(1) {
            let (tx, mut rx) = mpsc::channel::<Job>(1);
            std::thread::Builder::new()
                .name(format!("stampede-worker-{index}"))
                .spawn(move || {
                    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                        Ok(rt) => rt,
                        Err(e) => {
                            tracing::error!(worker = index, error = %e, "Worker runtime failed to start");
                            return;
                        }
                    };
                    let local = tokio::task::LocalSet::new();
                    local.block_on(&rt, async move {
                        while let Some(job) = rx.recv().await {
                            worker::run(job).await;
                        }
                    });
                })
                .map_err(|source| EngineError::Spawn { index, source })?;
            jobs.push(tx);
        }
        // Threads are not joined: dropping the engine closes their job channels and each thread
        // ends after its current step, which a cancelled step bounds by the request timeout.
        Ok(Engine { jobs })
    }

    pub fn threads(&self) -> usize {
        self.jobs.len()
    }

    /// Hands each worker its job for a step.
    pub async fn dispatch(&self, jobs: Vec<Job>) -> Result<(), EngineError> {
        for (tx, job) in self.jobs.iter().zip(jobs) {
            tx.send(job).await.map_err(|_| EngineError::Stopped)?;
        }
        Ok(())
    }
}
