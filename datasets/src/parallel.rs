//! A queue of jobs worked off by a few scoped threads: the writer's table files and a batch's
//! column chunks are both encoded this way.

use std::sync::Mutex;

/// Runs `work` on every job, `threads` at a time (the caller's thread one of them), taking jobs
/// from the end of `jobs` (sort it so the largest come last, and they start first). A thread
/// stops at its first error, which is returned; `panicked` stands for a thread that panicked.
pub(crate) fn work_off<T: Send, E: Send>(
    jobs: Vec<T>,
    threads: usize,
    work: impl Fn(T) -> Result<(), E> + Sync,
    panicked: impl Fn() -> E,
) -> Result<(), E> {
    let helpers = threads.clamp(1, jobs.len().max(1)) - 1;
    let queue = Mutex::new(jobs);
    let worker = || -> Result<(), E> {
        loop {
            // Taken apart from the call, so the lock is not held while the job runs.
            let next = queue.lock().expect("queue lock").pop();
            let Some(job) = next else {
                return Ok(());
            };
            work(job)?;
        }
    };
    std::thread::scope(|scope| {
        let spawned: Vec<_> = (0..helpers).map(|_| scope.spawn(worker)).collect();
        let mut result = worker();
        for helper in spawned {
            result = result.and(helper.join().unwrap_or_else(|_| Err(panicked())));
        }
        result
    })
}
