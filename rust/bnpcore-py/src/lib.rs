//! Thin PyO3 bindings of the `bnpcore` core crate: extract arguments, borrow arrays, release the
//! GIL, call the core, convert the result or error. No arithmetic lives here.

mod errors;
mod hmm;
mod parallel;

use bnpcore::alloc::Alloc;
use bnpcore::fresh::FreshOptions;
use bnpcore::local::{Dest, LocalOptions, Proposal};
use bnpcore::obs::{Bern, DiagGauss, Gauss, Mult, Obs};
use ndarray::{Array1, Array2};
use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::to_py;
use crate::parallel::{run, run_inline};

fn get_f64(d: &Bound<'_, PyDict>, key: &str) -> PyResult<f64> {
    d.get_item(key)?.ok_or_else(|| PyKeyError::new_err(format!("prior is missing `{key}`")))?.extract::<f64>()
}
fn get_arr1(d: &Bound<'_, PyDict>, key: &str) -> PyResult<Array1<f64>> {
    let v = d.get_item(key)?.ok_or_else(|| PyKeyError::new_err(format!("prior is missing `{key}`")))?;
    let a: PyReadonlyArray1<f64> = v.extract().map_err(|_| PyTypeError::new_err(format!("prior `{key}` must be a 1-D float64 array")))?;
    Ok(a.as_array().to_owned())
}
fn get_arr2(d: &Bound<'_, PyDict>, key: &str) -> PyResult<Array2<f64>> {
    let v = d.get_item(key)?.ok_or_else(|| PyKeyError::new_err(format!("prior is missing `{key}`")))?;
    let a: PyReadonlyArray2<f64> = v.extract().map_err(|_| PyTypeError::new_err(format!("prior `{key}` must be a 2-D float64 array")))?;
    Ok(a.as_array().to_owned())
}

/// An observation model (kind + prior hyperparameters). Immutable.
#[pyclass(name = "ObsModel", frozen, module = "bnpcore._core")]
struct PyObs {
    inner: Obs,
}

#[pymethods]
impl PyObs {
    /// Build from a kind name and a dict of prior hyperparameters (see docs/internals.md).
    #[new]
    fn new(py: Python<'_>, kind: &str, prior: &Bound<'_, PyDict>) -> PyResult<Self> {
        let built = match kind {
            "gauss" => {
                Gauss::new(get_f64(prior, "nu")?, get_f64(prior, "kappa")?, get_arr1(prior, "m")?, get_arr2(prior, "B")?).map(Obs::Gauss)
            }
            "zero_mean_gauss" => Gauss::zero_mean(get_f64(prior, "nu")?, get_arr2(prior, "B")?).map(Obs::Gauss),
            "diag_gauss" => {
                DiagGauss::new(get_f64(prior, "nu")?, get_f64(prior, "kappa")?, get_arr1(prior, "m")?, get_arr1(prior, "beta")?)
                    .map(Obs::DiagGauss)
            }
            "mult" => Mult::new(get_arr1(prior, "lam")?).map(Obs::Mult),
            "bern" => Bern::new(get_arr1(prior, "lam1")?, get_arr1(prior, "lam0")?).map(Obs::Bern),
            "ar_gauss" => {
                bnpcore::obs::ArGauss::new(get_f64(prior, "nu")?, get_arr2(prior, "B")?, get_arr2(prior, "M")?, get_arr2(prior, "V")?)
                    .map(Obs::ArGauss)
            }
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "unknown observation model `obs={other:?}`; expected one of gauss, diag_gauss, zero_mean_gauss, mult, bern, ar_gauss"
                )))
            }
        };
        built.map(|inner| PyObs { inner }).map_err(|e| to_py(py, e))
    }

    /// Model name.
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    /// Number of data columns.
    #[getter]
    fn n_features(&self) -> usize {
        self.inner.n_features()
    }
    /// Length of one statistic row.
    #[getter]
    fn stat_dim(&self) -> usize {
        self.inner.stat_dim()
    }
    /// Log normaliser of the prior.
    #[getter]
    fn c_prior(&self) -> f64 {
        self.inner.c_prior()
    }

    /// Validate a data block (shape, finiteness, support); raises on failure.
    #[pyo3(signature = (x, name = "X"))]
    fn check_data(&self, py: Python<'_>, x: PyReadonlyArray2<'_, f64>, name: &str) -> PyResult<()> {
        let x = x.as_array();
        run(py, Some(1), || self.inner.check_data(x, name))
    }

    /// Σ_n h(x_n).
    fn h_sum(&self, x: PyReadonlyArray2<'_, f64>) -> f64 {
        self.inner.h_sum(x.as_array())
    }

    /// Summaries (N, S) of data `x` with dense responsibilities `resp`.
    #[pyo3(signature = (x, resp, n_threads = None))]
    fn summarize<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<'py, f64>,
        resp: PyReadonlyArray2<'py, f64>,
        n_threads: Option<usize>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let (x, r) = (x.as_array(), resp.as_array());
        let (n, s) = run(py, n_threads, || self.inner.summarize(x, r))?;
        Ok((n.into_pyarray(py).into_any(), s.into_pyarray(py).into_any()))
    }

    /// E_q[log F(x_n | φ_k)] with the posterior of (n_post, s_post).
    #[pyo3(signature = (x, n_post, s_post, n_threads = None))]
    fn e_log_lik<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<'py, f64>,
        n_post: PyReadonlyArray1<'py, f64>,
        s_post: PyReadonlyArray2<'py, f64>,
        n_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (x, n, s) = (x.as_array(), n_post.as_array(), s_post.as_array());
        Ok(run(py, n_threads, || self.inner.e_log_lik(x, n, s))?.into_pyarray(py).into_any())
    }

    /// Plug-in log F(x_n | φ̂_k) at the posterior-mean point estimates.
    #[pyo3(signature = (x, n_post, s_post, n_threads = None))]
    fn log_density<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<'py, f64>,
        n_post: PyReadonlyArray1<'py, f64>,
        s_post: PyReadonlyArray2<'py, f64>,
        n_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (x, n, s) = (x.as_array(), n_post.as_array(), s_post.as_array());
        Ok(run(py, n_threads, || self.inner.log_density(x, n, s))?.into_pyarray(py).into_any())
    }

    /// Σ_k [c(prior) − c(prior ⊕ (N_k, S_k))] (ELBO data term without Σh).
    fn elbo_data(&self, py: Python<'_>, n: PyReadonlyArray1<'_, f64>, s: PyReadonlyArray2<'_, f64>) -> PyResult<f64> {
        let (n, s) = (n.as_array(), s.as_array());
        run(py, None, || self.inner.elbo_data(n, s))
    }

    /// Per-cluster terms of `elbo_data`.
    fn elbo_data_per_cluster<'py>(
        &self,
        py: Python<'py>,
        n: PyReadonlyArray1<'py, f64>,
        s: PyReadonlyArray2<'py, f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (n, s) = (n.as_array(), s.as_array());
        Ok(run(py, None, || self.inner.elbo_data_per_cluster(n, s))?.into_pyarray(py).into_any())
    }

    /// Σ_n r_nk E_q[log F(x_n|φ_k)] from summaries (n, s), posterior from (n_post, s_post).
    fn e_log_lik_sum_from_stats<'py>(
        &self,
        py: Python<'py>,
        n_post: PyReadonlyArray1<'py, f64>,
        s_post: PyReadonlyArray2<'py, f64>,
        n: PyReadonlyArray1<'py, f64>,
        s: PyReadonlyArray2<'py, f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (np_, sp, n, s) = (n_post.as_array(), s_post.as_array(), n.as_array(), s.as_array());
        Ok(run(py, None, || self.inner.e_log_lik_sum_from_stats(np_, sp, n, s))?.into_pyarray(py).into_any())
    }

    /// Point estimates (dict of arrays) of the posterior (n, s).
    fn point_estimates<'py>(
        &self,
        py: Python<'py>,
        n: PyReadonlyArray1<'py, f64>,
        s: PyReadonlyArray2<'py, f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (n, s) = (n.as_array(), s.as_array());
        let pe = run(py, None, || self.inner.point_estimates(n, s))?;
        let d = PyDict::new(py);
        for (k, v) in pe {
            d.set_item(k, v.into_pyarray(py))?;
        }
        Ok(d)
    }

    /// Divergences D(μ̃_n, μ̃_i) of every row to row i.
    #[pyo3(signature = (x, i, n_threads = None))]
    fn smoothed_divergence<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<'py, f64>,
        i: usize,
        n_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let x = x.as_array();
        Ok(run(py, n_threads, || self.inner.smoothed_divergence(x, i))?.into_pyarray(py).into_any())
    }

    /// Bregman k-means++ seeding driven by the given uniforms; returns row indices.
    #[pyo3(signature = (x, uniforms, n_threads = None))]
    fn kmeanspp(
        &self,
        py: Python<'_>,
        x: PyReadonlyArray2<'_, f64>,
        uniforms: PyReadonlyArray1<'_, f64>,
        n_threads: Option<usize>,
    ) -> PyResult<Vec<usize>> {
        let (x, u) = (x.as_array(), uniforms.as_array());
        run(py, n_threads, || self.inner.kmeanspp(x, u))
    }
}

fn extract_proposals(obs: &Obs, py: Python<'_>, props: Option<&Bound<'_, PyList>>) -> PyResult<Vec<Proposal>> {
    let mut out = Vec::new();
    let Some(props) = props else { return Ok(out) };
    for item in props.iter() {
        let d = item.cast::<PyDict>().map_err(|_| PyTypeError::new_err("each proposal must be a dict"))?;
        let src: Vec<usize> = d.get_item("src")?.ok_or_else(|| PyKeyError::new_err("proposal needs `src`"))?.extract()?;
        let dest = if let Some(cols) = d.get_item("dest_cols")? {
            Dest::Columns(cols.extract()?)
        } else {
            let fn_: PyReadonlyArray1<f64> =
                d.get_item("fresh_N")?.ok_or_else(|| PyKeyError::new_err("proposal needs `dest_cols` or `fresh_N`"))?.extract()?;
            let fs: PyReadonlyArray2<f64> =
                d.get_item("fresh_S")?.ok_or_else(|| PyKeyError::new_err("proposal needs `fresh_S`"))?.extract()?;
            let fe: PyReadonlyArray1<f64> =
                d.get_item("fresh_e_log_pi")?.ok_or_else(|| PyKeyError::new_err("proposal needs `fresh_e_log_pi`"))?.extract()?;
            let (fn_, fs) = (fn_.as_array(), fs.as_array());
            let table = run(py, None, || obs.e_log_lik_table(fn_, fs))?;
            Dest::Fresh { table, e_log_pi: fe.as_array().to_owned() }
        };
        out.push(Proposal { src, dest });
    }
    Ok(out)
}

/// Fused local step + summaries of one batch. Returns a dict with `N`, `S`, `H`, `h_sum`,
/// `lse_sum`, `pair_H`, `proposals` (list of (N, S, H)), and optionally `resp`, `col`, `cooccur`.
/// With `top_l` (L-sparse responsibilities) and `return_resp`, `resp_idx` (uint32, N × min(L, K),
/// padded with 2**32-1) and `resp_val` (float64, same shape) replace `resp`; `n_candidates` (int)
/// is present when the L-sparse candidates came from the single-precision GEMM (zero-mean
/// Gaussian, large K): the number of (row, cluster) log weights recomputed in float64.
#[pyfunction]
#[pyo3(signature = (obs, x, n_post, s_post, e_log_pi, *, weights = None, merge_pairs = None, proposals = None,
                    collect_col = None, cooccur_col = None, return_resp = false, top_l = None, n_threads = None))]
fn local_step<'py>(
    py: Python<'py>,
    obs: &PyObs,
    x: PyReadonlyArray2<'py, f64>,
    n_post: PyReadonlyArray1<'py, f64>,
    s_post: PyReadonlyArray2<'py, f64>,
    e_log_pi: PyReadonlyArray1<'py, f64>,
    weights: Option<PyReadonlyArray1<'py, f64>>,
    merge_pairs: Option<Vec<(usize, usize)>>,
    proposals: Option<Bound<'py, PyList>>,
    collect_col: Option<usize>,
    cooccur_col: Option<usize>,
    return_resp: bool,
    top_l: Option<usize>,
    n_threads: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    let props = extract_proposals(&obs.inner, py, proposals.as_ref())?;
    let w = weights.as_ref().map(|w| w.as_array());
    let opts = LocalOptions {
        weights: w,
        merge_pairs: merge_pairs.unwrap_or_default(),
        proposals: props,
        collect_col,
        cooccur_col,
        return_resp,
        top_l,
    };
    let (x, n, s, e) = (x.as_array(), n_post.as_array(), s_post.as_array(), e_log_pi.as_array());
    let out = run(py, n_threads, || obs.inner.local_step(x, n, s, e, &opts))?;
    let d = PyDict::new(py);
    d.set_item("N", out.n.into_pyarray(py))?;
    d.set_item("S", out.s.into_pyarray(py))?;
    d.set_item("H", out.h.into_pyarray(py))?;
    d.set_item("h_sum", out.h_sum)?;
    d.set_item("lse_sum", out.lse_sum)?;
    d.set_item("pair_H", out.pair_h.into_pyarray(py))?;
    let props = PyList::empty(py);
    for p in out.proposals {
        props.append((p.n.into_pyarray(py), p.s.into_pyarray(py), p.h.into_pyarray(py)))?;
    }
    d.set_item("proposals", props)?;
    if let Some(r) = out.resp {
        d.set_item("resp", r.into_pyarray(py))?;
    }
    if let Some(r) = out.resp_idx {
        d.set_item("resp_idx", r.into_pyarray(py))?;
    }
    if let Some(r) = out.resp_val {
        d.set_item("resp_val", r.into_pyarray(py))?;
    }
    if let Some(c) = out.col {
        d.set_item("col", c.into_pyarray(py))?;
    }
    if let Some(c) = out.cooccur {
        d.set_item("cooccur", c.into_pyarray(py))?;
    }
    if let Some(c) = out.n_candidates {
        d.set_item("n_candidates", c)?;
    }
    Ok(d)
}

/// Fresh clusters for a birth: k-means++ seeds (from `uniforms`), weighted Bregman k-means, VB
/// and greedy merges on the weighted subsample `(x, w)` (see `bnpcore::fresh`). Returns `None`
/// or `(N, S, gain)`.
#[pyfunction]
#[pyo3(signature = (obs, x, w, alloc, gamma, uniforms, n_fresh, n_seeds, iters, kmeans_iters, *, n_threads = None))]
fn fit_fresh_clusters<'py>(
    py: Python<'py>,
    obs: &PyObs,
    x: PyReadonlyArray2<'py, f64>,
    w: PyReadonlyArray1<'py, f64>,
    alloc: &str,
    gamma: f64,
    uniforms: PyReadonlyArray1<'py, f64>,
    n_fresh: i64,
    n_seeds: i64,
    iters: i64,
    kmeans_iters: i64,
    n_threads: Option<usize>,
) -> PyResult<Option<(Bound<'py, PyAny>, Bound<'py, PyAny>, f64)>> {
    let alloc = match alloc {
        "dp" => Alloc::Dp { gamma },
        "finite" => Alloc::Finite { gamma },
        other => return Err(to_py(py, bnpcore::Error::param("alloc", format!("expected \"dp\" or \"finite\", got {other:?}")))),
    };
    let count =
        |name: &str, v: i64| usize::try_from(v).map_err(|_| to_py(py, bnpcore::Error::param(name, format!("must be >= 0, got {v}"))));
    let opts = FreshOptions {
        n_fresh: count("n_fresh", n_fresh)?,
        n_seeds: count("n_seeds", n_seeds)?,
        iters: count("iters", iters)?,
        kmeans_iters: count("kmeans_iters", kmeans_iters)?,
    };
    let (x, w, u) = (x.as_array(), w.as_array(), uniforms.as_array());
    let out = run(py, n_threads, || obs.inner.fit_fresh_clusters(x, w, alloc, u, &opts))?;
    Ok(out.map(|f| (f.n.into_pyarray(py).into_any(), f.s.into_pyarray(py).into_any(), f.gain)))
}

macro_rules! alloc_vec_fn {
    ($name:ident, $core:path, $doc:literal) => {
        #[doc = $doc]
        #[pyfunction]
        fn $name<'py>(py: Python<'py>, n: PyReadonlyArray1<'py, f64>, gamma: f64) -> PyResult<Bound<'py, PyAny>> {
            let n = n.as_array();
            Ok(run_inline(py, || $core(n, gamma))?.into_pyarray(py).into_any())
        }
    };
}
macro_rules! alloc_scalar_fn {
    ($name:ident, $core:path, $doc:literal) => {
        #[doc = $doc]
        #[pyfunction]
        fn $name(py: Python<'_>, n: PyReadonlyArray1<'_, f64>, gamma: f64) -> PyResult<f64> {
            let n = n.as_array();
            run_inline(py, || $core(n, gamma))
        }
    };
}
alloc_vec_fn!(dp_e_log_pi, bnpcore::alloc::dp_e_log_pi, "E[ln π_k] of the DP mixture with counts N.");
alloc_vec_fn!(dp_e_pi, bnpcore::alloc::dp_e_pi, "E[π_k] of the DP mixture with counts N.");
alloc_scalar_fn!(dp_elbo, bnpcore::alloc::dp_elbo, "DP allocation ELBO term at optimal sticks.");
alloc_vec_fn!(finite_e_log_pi, bnpcore::alloc::finite_e_log_pi, "E[ln π_k] of the finite mixture.");
alloc_vec_fn!(finite_theta, bnpcore::alloc::finite_theta, "Optimal Dirichlet parameters γ/K + N.");
alloc_scalar_fn!(finite_elbo, bnpcore::alloc::finite_elbo, "Finite-mixture allocation ELBO term.");

/// Digamma (vectorised), exposed for tests.
#[pyfunction]
fn digamma<'py>(py: Python<'py>, x: PyReadonlyArray1<'py, f64>) -> Bound<'py, PyAny> {
    x.as_array().mapv(bnpcore::special::digamma).into_pyarray(py).into_any()
}

/// Default number of threads (BNPCORE_NUM_THREADS or all cores).
#[pyfunction]
fn default_num_threads() -> usize {
    parallel::default_threads()
}

/// Called in a child process after fork: abandon the parent's thread pools.
#[pyfunction]
fn _after_fork_in_child() {
    parallel::after_fork_in_child();
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyObs>()?;
    m.add_function(wrap_pyfunction!(local_step, m)?)?;
    m.add_function(wrap_pyfunction!(fit_fresh_clusters, m)?)?;
    m.add_function(wrap_pyfunction!(dp_e_log_pi, m)?)?;
    m.add_function(wrap_pyfunction!(dp_e_pi, m)?)?;
    m.add_function(wrap_pyfunction!(dp_elbo, m)?)?;
    m.add_function(wrap_pyfunction!(finite_e_log_pi, m)?)?;
    m.add_function(wrap_pyfunction!(finite_theta, m)?)?;
    m.add_function(wrap_pyfunction!(finite_elbo, m)?)?;
    m.add_function(wrap_pyfunction!(digamma, m)?)?;
    m.add_function(wrap_pyfunction!(default_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(_after_fork_in_child, m)?)?;
    hmm::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
