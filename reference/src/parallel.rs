//! Deterministic parallelism: fixed work decomposition, ordered results.
//!
//! Work is split into tasks whose boundaries depend only on the problem shape, never on the
//! thread count; each task computes its result independently, and results are collected in task
//! order and combined on one thread. So the bits are the same for 1, 2 or 64 threads.
//!
//! Every task is also a cancellation point ([`crate::cancel`]): the caller's current token is
//! carried into the task (on whichever thread runs it) and checked before the task starts, so
//! a cancelled computation stops within one task's time, whatever the thread count.

use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// How many threads a reference computation may use. The result never depends on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Threads(pub usize);

impl Threads {
    /// One thread: no pool at all.
    pub const ONE: Threads = Threads(1);

    /// The machine's available parallelism.
    pub fn available() -> Threads {
        Threads(
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
        )
    }
}

/// How many threads per available core a reference computation may be given: more only adds
/// scheduling and memory (each thread has its own stack), never speed, and a request for tens
/// of thousands of threads could hold the machine for minutes. `conform --threads` refuses more.
pub const MAX_THREADS_PER_CORE: usize = 4;

impl Threads {
    /// The most threads `--threads` accepts on this machine: [`MAX_THREADS_PER_CORE`] times its
    /// available parallelism.
    pub fn max_allowed() -> usize {
        Threads::available().0.saturating_mul(MAX_THREADS_PER_CORE)
    }
}

impl Default for Threads {
    fn default() -> Self {
        Threads::available()
    }
}

type Pools = Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>;

fn pools() -> &'static Pools {
    static POOLS: OnceLock<Pools> = OnceLock::new();
    POOLS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Lets go of every cached pool: the next computation starts fresh threads (the old ones end
/// once the computations holding them finish). A timing comparison in rounds calls it between
/// rounds, so where the scheduler placed one round's threads does not hold for the next.
/// The bits never depend on it.
pub fn renew_pools() {
    pools().lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// The pool of `threads` threads, or None when the system cannot start them (a thread or
/// memory limit): the caller then computes on its own thread, which gives the same bits.
fn pool(threads: usize) -> Option<Arc<rayon::ThreadPool>> {
    let mut map = pools().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = map.get(&threads) {
        return Some(p.clone());
    }
    // A failed build is not cached: a later call may find the resources free again.
    let p = Arc::new(build_pool(threads, None)?);
    map.insert(threads, p.clone());
    Some(p)
}

fn build_pool(threads: usize, stack_size: Option<usize>) -> Option<rayon::ThreadPool> {
    let mut b = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("conform-ref-{threads}-{i}"));
    if let Some(s) = stack_size {
        b = b.stack_size(s);
    }
    b.build().ok()
}

/// Runs `f(task)` for `task in 0..n_tasks` on `threads` threads and returns the results in task
/// order.
pub fn map_tasks<T, F>(n_tasks: usize, threads: Threads, f: F) -> Vec<T>
where
    T: Send,
    F: Fn(usize) -> T + Sync + Send,
{
    let f = cancellable(f);
    if threads.0 <= 1 || n_tasks <= 1 {
        return (0..n_tasks).map(f).collect();
    }
    match pool(threads.0) {
        Some(p) => p.install(|| (0..n_tasks).into_par_iter().map(f).collect()),
        None => (0..n_tasks).map(f).collect(),
    }
}

/// `f` as a task: run with the caller's current cancellation token (captured here, on the
/// calling thread) and after a cancellation point.
fn cancellable<T>(f: impl Fn(usize) -> T + Sync + Send) -> impl Fn(usize) -> T + Sync + Send {
    let token = crate::cancel::current();
    move |i| {
        crate::cancel::with_current(token.clone(), || {
            crate::cancel::checkpoint();
            f(i)
        })
    }
}

/// Splits `out` into consecutive chunks of `chunk_len` elements (the last may be shorter) and
/// fills each with `f(chunk_index, chunk)` on `threads` threads. Chunks are disjoint, so the
/// result does not depend on scheduling.
pub fn fill_chunks<T, F>(out: &mut [T], chunk_len: usize, threads: Threads, f: F)
where
    T: Send,
    F: Fn(usize, &mut [T]) + Sync + Send,
{
    let token = crate::cancel::current();
    let f = |i: usize, c: &mut [T]| {
        crate::cancel::with_current(token.clone(), || {
            crate::cancel::checkpoint();
            f(i, c)
        })
    };
    let chunk_len = chunk_len.max(1);
    let pool = if threads.0 <= 1 || out.len() <= chunk_len {
        None
    } else {
        pool(threads.0)
    };
    let Some(pool) = pool else {
        for (i, c) in out.chunks_mut(chunk_len).enumerate() {
            f(i, c);
        }
        return;
    };
    pool.install(|| {
        out.par_chunks_mut(chunk_len)
            .enumerate()
            .for_each(|(i, c)| f(i, c))
    });
}

/// `f` applied to every element of `input`, in fixed chunks on `threads` threads (each element
/// independently, so the result does not depend on the thread count).
pub fn map_elements<S, T, F>(input: &[S], threads: Threads, f: F) -> Vec<T>
where
    S: Sync,
    T: Send + Copy + Default,
    F: Fn(&S) -> T + Sync + Send,
{
    const CHUNK: usize = 1 << 16;
    let mut out = vec![T::default(); input.len()];
    fill_chunks(&mut out, CHUNK, threads, |ci, chunk| {
        for (o, x) in chunk.iter_mut().zip(&input[ci * CHUNK..]) {
            *o = f(x);
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_in_task_order_for_any_thread_count() {
        for t in [1, 2, 7] {
            let v = map_tasks(100, Threads(t), |i| i * i);
            assert_eq!(v, (0..100).map(|i| i * i).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_pool_the_system_cannot_start_is_none_not_a_panic() {
        // Thread stacks of 2^46 bytes each cannot be mapped: the build fails, as it does when
        // a thread or memory limit stops the spawn.
        assert!(build_pool(3, Some(1 << 46)).is_none());
        assert!(build_pool(2, None).is_some());
    }

    #[test]
    fn a_renewed_pool_is_a_new_one_and_computes_the_same() {
        let before = pool(3).unwrap();
        renew_pools();
        let after = pool(3).unwrap();
        assert!(!Arc::ptr_eq(&before, &after));
        let f = |i: usize| i * i;
        assert_eq!(
            map_tasks(9, Threads(3), f),
            (0..9).map(f).collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_thread_ceiling_is_a_multiple_of_the_cores() {
        assert_eq!(
            Threads::max_allowed(),
            Threads::available().0 * MAX_THREADS_PER_CORE
        );
        assert!(Threads::max_allowed() >= MAX_THREADS_PER_CORE);
    }

    /// A cancelled token stops every task after it (on any thread count) and the call
    /// unwinds to `cancel::run`; without a token, or uncancelled, the results are the same.
    #[test]
    fn tasks_are_cancellation_points_on_every_thread() {
        use crate::cancel::{run, CancelToken, Cancelled};
        use std::sync::atomic::{AtomicUsize, Ordering};
        for t in [1, 2, 7] {
            let token = CancelToken::new();
            let done = AtomicUsize::new(0);
            let r = run(&token, || {
                map_tasks(1000, Threads(t), |i| {
                    if i == 10 {
                        token.cancel();
                    }
                    // Nested parallel calls see the token too.
                    map_tasks(2, Threads(t), |_| ());
                    done.fetch_add(1, Ordering::SeqCst);
                    i
                })
            });
            assert_eq!(r, Err(Cancelled), "{t} threads");
            assert!(done.load(Ordering::SeqCst) < 1000, "{t} threads");
            let token = CancelToken::new();
            let r = run(&token, || {
                let mut out = vec![0usize; 1000];
                fill_chunks(&mut out, 10, Threads(t), |ci, c| {
                    if ci == 3 {
                        token.cancel();
                    }
                    c.fill(ci);
                });
                out
            });
            assert_eq!(r, Err(Cancelled), "{t} threads");
            let r = run(&CancelToken::new(), || {
                map_tasks(100, Threads(t), |i| i * i)
            });
            assert_eq!(r.unwrap(), map_tasks(100, Threads(t), |i| i * i));
        }
    }

    #[test]
    fn fill_chunks_covers_everything_once() {
        for t in [1, 2, 7] {
            let mut out = vec![0usize; 1003];
            fill_chunks(&mut out, 64, Threads(t), |ci, c| {
                for (j, x) in c.iter_mut().enumerate() {
                    *x = ci * 64 + j;
                }
            });
            assert!(out.iter().enumerate().all(|(i, &x)| i == x));
        }
    }
}
