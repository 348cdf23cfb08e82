//! Thin PyO3 bindings of the `bnpcore` core crate: extract arguments, borrow arrays, release the
//! GIL, call the core, convert the result or error. No arithmetic lives here. One file per core
//! module; this file only lists the modules and registers their classes and functions.

mod alloc;
mod errors;
mod fresh;
mod hmm;
mod local;
mod obs;
mod parallel;
mod special;
mod tfsvi;
mod topic;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<obs::PyObs>()?;
    m.add_class::<alloc::PyAlloc>()?;
    m.add_function(wrap_pyfunction!(local::local_step, m)?)?;
    m.add_function(wrap_pyfunction!(local::prepare_local, m)?)?;
    m.add_class::<local::PyPrepared>()?;
    m.add_function(wrap_pyfunction!(fresh::fit_fresh_clusters, m)?)?;
    m.add_function(wrap_pyfunction!(special::digamma, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::default_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::max_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::_after_fork_in_child, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::_set_caller_threads, m)?)?;
    topic::register(m)?;
    hmm::register(m)?;
    tfsvi::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
