//! The in-process platforms: the batch priced by the kernel in this process,
//! on a one-thread pool (`local-1`) or a pool with a thread per core (`local-all`).

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::{Context, anyhow};
use mcq_kernel::Spec;
use rayon::prelude::*;

use crate::breakdown::{Breakdown, Phases};
use crate::trial::{CallOutcome, TrialOutcome};

/// Builds the rayon pool a local platform runs on.
pub(crate) fn pool(threads: usize) -> anyhow::Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("mcq-bench-{i}"))
        .build()
        .context("building the thread pool for a local platform")
}

/// Prices `specs` on `pool`. With one thread the calls run one after the
/// other, as the original loop did; with more, calls and the chunks inside
/// each call are spread over the pool by work stealing, so small calls (one
/// chunk each) still use every core. `on_done` is called after each call.
pub(crate) fn run_trial(
    pool: &rayon::ThreadPool,
    specs: &[Spec],
    on_done: &(dyn Fn() + Sync),
) -> anyhow::Result<TrialOutcome> {
    let cancel = AtomicBool::new(false);
    let start = Instant::now();
    let price_one = |spec: &Spec| -> anyhow::Result<CallOutcome> {
        let began = start.elapsed();
        let valid = spec.validate().map_err(|errors| {
            let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
            anyhow!("invalid spec: {}", text.join("; "))
        })?;
        let result = valid
            .price(&cancel)
            .context("the local computation was cancelled")?;
        let ended = start.elapsed();
        on_done();
        let started_ms = began.as_secs_f64() * 1e3;
        let finished_ms = ended.as_secs_f64() * 1e3;
        Ok(CallOutcome {
            job_id: None,
            price: result.price,
            std_error: result.std_error,
            // A local call waits only for the calls ahead of it, and its
            // result is in hand the moment the kernel returns.
            breakdown: Breakdown {
                submitted_ms: 0.0,
                started_ms,
                finished_ms,
                seen_ms: finished_ms,
                queue_wait_ms: started_ms,
                compute_ms: result.elapsed_ms,
                dispatch_ms: finished_ms - started_ms - result.elapsed_ms,
                result_latency_ms: 0.0,
                end_to_end_ms: finished_ms,
                server_queue_wait_ms: None,
                phases: Phases {
                    claimed_ms: started_ms,
                    compute_started_ms: started_ms,
                    compute_finished_ms: finished_ms,
                    recorded_ms: finished_ms,
                    measured: true,
                },
            },
        })
    };
    let calls = pool.install(|| {
        if pool.current_num_threads() == 1 {
            specs
                .iter()
                .map(price_one)
                .collect::<anyhow::Result<Vec<_>>>()
        } else {
            specs
                .par_iter()
                .map(price_one)
                .collect::<anyhow::Result<Vec<_>>>()
        }
    })?;
    let wall_ms = start.elapsed().as_secs_f64() * 1e3;
    let slots = u32::try_from(pool.current_num_threads()).unwrap_or(u32::MAX);
    Ok(TrialOutcome {
        wall_ms,
        slots,
        calls,
        polls: 0,
    })
}
