//! One helper for every call that does real work: release the GIL, run inside the bnpcore rayon
//! pool of the requested size, catch panics, map errors.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::{panic_to_py, to_py};

/// Incremented in a child process after `fork`: pools of the parent are unusable there.
static GENERATION: AtomicUsize = AtomicUsize::new(0);
/// Pools by (fork generation, size), each with the tick of its last use.
type PoolMap = HashMap<(usize, usize), (Arc<rayon::ThreadPool>, u64)>;
static POOLS: OnceLock<Mutex<PoolMap>> = OnceLock::new();
static TICK: AtomicUsize = AtomicUsize::new(0);
/// Pools kept alive between calls (the least recently used one beyond this is dropped; a call
/// still running in it keeps it until it returns).
const KEPT_POOLS: usize = 4;

/// Most threads a call runs on: results never depend on the count, and beyond a few threads
/// per core more only cost (a request of 4096 threads took minutes to start).
pub fn max_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (4 * cores).max(64)
}

thread_local! {
    /// The `n_threads` of the estimator call running on this (Python) thread, 0 when none:
    /// the default of the calls it makes without an `n_threads` of their own (see
    /// [`_set_caller_threads`]). Per thread, so that estimators fitted concurrently in several
    /// Python threads keep their own counts.
    static CALLER_THREADS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Default thread count: the running estimator call's `n_threads` on this thread, else
/// `BNPCORE_NUM_THREADS` or all cores.
pub fn default_threads() -> usize {
    let caller = CALLER_THREADS.with(|c| c.get());
    if caller > 0 {
        return caller;
    }
    std::env::var("BNPCORE_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn pool(n: usize) -> PyResult<Arc<rayon::ThreadPool>> {
    let gen = GENERATION.load(Ordering::SeqCst);
    let map = POOLS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = map.lock().map_err(|_| PyValueError::new_err("thread pool registry poisoned"))?;
    let tick = TICK.fetch_add(1, Ordering::SeqCst) as u64;
    if let Some((p, used)) = map.get_mut(&(gen, n)) {
        *used = tick;
        return Ok(p.clone());
    }
    let p = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("bnpcore-{i}"))
        .build()
        .map_err(|e| PyValueError::new_err(format!("cannot start {n} threads: {e}")))?;
    let p = Arc::new(p);
    while map.len() >= KEPT_POOLS {
        let Some(oldest) = map.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| *k) else { break };
        map.remove(&oldest);
    }
    map.insert((gen, n), (p.clone(), tick));
    Ok(p)
}

/// Mark that we are in a forked child: old pools are abandoned (never joined) and new ones are
/// created on demand.
pub fn after_fork_in_child() {
    GENERATION.fetch_add(1, Ordering::SeqCst);
    if let Some(m) = POOLS.get() {
        if let Ok(mut map) = m.try_lock() {
            // leak the parent's pools: their threads do not exist in the child
            for (_, (p, _)) in map.drain() {
                std::mem::forget(p);
            }
        }
    }
}

/// Run `f` without the GIL inside a pool of `n_threads` threads (None = default), at most
/// [`max_threads`].
pub fn run<T, F>(py: Python<'_>, n_threads: Option<usize>, f: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> bnpcore::Result<T> + Send,
{
    let n = match n_threads {
        Some(0) => return Err(to_py(py, bnpcore::Error::param("n_threads", "must be >= 1 or None, got 0"))),
        Some(n) => n,
        None => default_threads(),
    };
    let p = pool(n.min(max_threads()))?;
    let out = py.detach(|| catch_unwind(AssertUnwindSafe(|| p.install(f))));
    match out {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(to_py(py, e)),
        Err(payload) => Err(panic_to_py(payload)),
    }
}

/// Run `f` without the GIL on the calling thread (no hand-over to a pool thread): for calls
/// that are small and sequential, where waking the pool would cost more than the work. `f`
/// must not use rayon: its calls would run in the global pool, which ignores `n_threads` and
/// has no threads in a forked child (bnpcore's pools are renewed there, the global one is not).
pub fn run_on_caller<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> bnpcore::Result<T> + Send,
{
    match py.detach(|| catch_unwind(AssertUnwindSafe(f))) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(to_py(py, e)),
        Err(payload) => Err(panic_to_py(payload)),
    }
}

/// Run a small, sequential `f` (no rayon inside) on the calling thread with the GIL held:
/// O(K) work where handing over to a pool thread would cost more than the work. Panics are
/// caught and errors mapped as in [`run`].
pub fn run_inline<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: FnOnce() -> bnpcore::Result<T>,
{
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(to_py(py, e)),
        Err(payload) => Err(panic_to_py(payload)),
    }
}

/// Most threads a call runs on (larger `n_threads` are capped: results do not depend on it).
#[pyfunction]
pub(crate) fn max_num_threads() -> usize {
    max_threads()
}

/// Default number of threads: the running estimator call's `n_threads` on this thread, else
/// BNPCORE_NUM_THREADS or all cores.
#[pyfunction]
pub(crate) fn default_num_threads() -> usize {
    default_threads()
}

/// Set the default thread count of this Python thread's calls that are given no `n_threads`
/// (0: none, back to `BNPCORE_NUM_THREADS` or all cores); returns the previous value. The
/// estimators set their `n_threads` for the duration of a fit.
#[pyfunction]
pub(crate) fn _set_caller_threads(n: usize) -> usize {
    CALLER_THREADS.with(|c| c.replace(n.min(max_threads())))
}

/// Called in a child process after fork: abandon the parent's thread pools.
#[pyfunction]
pub(crate) fn _after_fork_in_child() {
    after_fork_in_child();
}
