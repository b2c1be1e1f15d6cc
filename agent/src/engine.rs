//! The worker threads: one per core by default, each a current-thread runtime that owns its connections,
//! started once per agent and handed one job per step.
use shared::schedule::even_share;
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
        let fd_limit = control::system::raise_fd_limit();
        let threads = threads.max(1);
        let mut jobs = Vec::with_capacity(threads);
        for index in 0..threads {
            let budget = socket_budget(fd_limit, threads, index);
            let (tx, mut rx) = mpsc::channel::<Job>(1);
            std::thread::Builder::new()
                .name(format!("stampede-worker-{index}"))
                .spawn(move || {
                    crate::socket::set_budget(budget);
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

/// Worker `index`'s socket budget: its even share of the usable descriptors, split as the
/// concurrency model splits its connections (`even_share`), so a step the capacity check lets through
/// (connections ≤ usable) fits every thread's budget. An unknown limit (0) sets none.
fn socket_budget(fd_limit: u64, threads: usize, index: usize) -> u64 {
    if fd_limit == 0 {
        return u64::MAX;
    }
    let usable = control::machine::usable_fds(fd_limit, threads as u64);
    even_share(usable, threads as u64, index as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threads_budgets_add_up_to_the_usable_fds_and_cover_any_share_that_fits() {
        // 1015 minus the 115 reserved (100, and 5 per thread), over 3 threads: 300 each; 1016 leaves
        // one over for thread 0.
        let budgets = |limit, n| {
            (0..n)
                .map(|i| socket_budget(limit, n, i))
                .collect::<Vec<_>>()
        };
        assert_eq!(budgets(1015, 3), [300, 300, 300]);
        assert_eq!(budgets(1016, 3), [301, 300, 300]);
        // A small limit keeps a quarter back.
        assert_eq!(budgets(64, 2), [24, 24]);
        assert_eq!(budgets(0, 2), [u64::MAX, u64::MAX]);
        // Any concurrency step the capacity check allows (connections ≤ usable) fits every
        // thread's budget, however the connections are dealt out.
        for threads in 1..6usize {
            for limit in [64u64, 257, 400, 1023] {
                let usable = control::machine::usable_fds(limit, threads as u64);
                assert_eq!(budgets(limit, threads).iter().sum::<u64>(), usable);
                for connections in 0..=usable {
                    for w in 0..threads {
                        let need = even_share(connections, threads as u64, w as u64);
                        assert!(
                            need <= socket_budget(limit, threads, w),
                            "{connections} connections, {threads} threads, limit {limit}"
                        );
                    }
                }
            }
        }
    }
}
