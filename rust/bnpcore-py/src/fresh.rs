//! Bindings of `bnpcore::fresh`: the fresh clusters of a birth fitted on a weighted subsample.

use bnpcore::fresh::FreshOptions;
use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::alloc::PyAlloc;
use crate::errors::to_py;
use crate::obs::PyObs;
use crate::parallel::run;

/// Fresh clusters for a birth: k-means++ seeds (from `uniforms`), weighted Bregman k-means, VB
/// and greedy merges on the weighted subsample `(x, w)` (see `bnpcore::fresh`). Returns `None`
/// or `(N, S, gain)`.
#[pyfunction]
#[pyo3(signature = (obs, x, w, alloc, uniforms, n_fresh, n_seeds, iters, kmeans_iters, *, seed_rows = 1, abandon_loss = None, abandon_after = 0, n_threads = None))]
pub(crate) fn fit_fresh_clusters<'py>(
    py: Python<'py>,
    obs: &PyObs,
    x: PyReadonlyArray2<'py, f64>,
    w: PyReadonlyArray1<'py, f64>,
    alloc: &PyAlloc,
    uniforms: PyReadonlyArray1<'py, f64>,
    n_fresh: i64,
    n_seeds: i64,
    iters: i64,
    kmeans_iters: i64,
    seed_rows: i64,
    abandon_loss: Option<f64>,
    abandon_after: i64,
    n_threads: Option<usize>,
) -> PyResult<Option<(Bound<'py, PyAny>, Bound<'py, PyAny>, f64)>> {
    let count =
        |name: &str, v: i64| usize::try_from(v).map_err(|_| to_py(py, bnpcore::Error::param(name, format!("must be >= 0, got {v}"))));
    let opts = FreshOptions {
        n_fresh: count("n_fresh", n_fresh)?,
        n_seeds: count("n_seeds", n_seeds)?,
        iters: count("iters", iters)?,
        kmeans_iters: count("kmeans_iters", kmeans_iters)?,
        seed_rows: count("seed_rows", seed_rows)?,
        abandon_loss,
        abandon_after: count("abandon_after", abandon_after)?,
    };
    if let Some(v) = abandon_loss {
        if !(v >= 0.0) {
            return Err(to_py(py, bnpcore::Error::param("abandon_loss", format!("must be >= 0 (nats per unit of weight), got {v}"))));
        }
    }
    let (x, w, u) = (x.as_array(), w.as_array(), uniforms.as_array());
    let out = run(py, n_threads, || obs.inner.fit_fresh_clusters(x, w, &alloc.inner, u, &opts))?;
    Ok(out.map(|f| (f.n.into_pyarray(py).into_any(), f.s.into_pyarray(py).into_any(), f.gain)))
}
