//! Bindings of `bnpcore::obs`: the `ObsModel` class (kind + prior hyperparameters).

use bnpcore::obs::{Bern, DiagGauss, Gauss, Mult, Obs, TermCache};
use ndarray::{Array1, Array2};
use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::to_py;
use crate::parallel::run;

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
pub(crate) struct PyObs {
    pub(crate) inner: Obs,
    /// memo of per-cluster data terms (`elbo_data`, `elbo_data_per_cluster`: the same bits)
    cache: TermCache,
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
        built.map(|inner| PyObs { inner, cache: TermCache::default() }).map_err(|e| to_py(py, e))
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
        x: &Bound<'py, PyAny>,
        n_post: PyReadonlyArray1<'py, f64>,
        s_post: PyReadonlyArray2<'py, f64>,
        n_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (n, s) = (n_post.as_array(), s_post.as_array());
        if let Ok(t) = x.cast::<pyo3::types::PyTuple>() {
            let out = crate::local::with_csr(py, t, |rows| run(py, n_threads, || self.inner.log_density_csr(rows, n, s)))?;
            return Ok(out.into_pyarray(py).into_any());
        }
        let x: PyReadonlyArray2<f64> = x.extract()?;
        let x = x.as_array();
        Ok(run(py, n_threads, || self.inner.log_density(x, n, s))?.into_pyarray(py).into_any())
    }

    /// Σ_k [c(prior) − c(prior ⊕ (N_k, S_k))] (ELBO data term without Σh).
    fn elbo_data(&self, py: Python<'_>, n: PyReadonlyArray1<'_, f64>, s: PyReadonlyArray2<'_, f64>) -> PyResult<f64> {
        let (n, s) = (n.as_array(), s.as_array());
        run(py, None, || self.inner.elbo_data_cached(&self.cache, n, s))
    }

    /// Empty the memo of per-cluster data terms (kept between calls while a fit runs).
    fn clear_term_cache(&self) {
        self.cache.clear();
    }

    /// Per-cluster terms of `elbo_data`.
    fn elbo_data_per_cluster<'py>(
        &self,
        py: Python<'py>,
        n: PyReadonlyArray1<'py, f64>,
        s: PyReadonlyArray2<'py, f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (n, s) = (n.as_array(), s.as_array());
        Ok(run(py, None, || self.inner.elbo_data_per_cluster_cached(&self.cache, n, s))?.into_pyarray(py).into_any())
    }

    /// Per-pair terms of `elbo_data` for the pooled clusters `(a[i], b[i])` (positions).
    fn elbo_data_per_pair<'py>(
        &self,
        py: Python<'py>,
        n: PyReadonlyArray1<'py, f64>,
        s: PyReadonlyArray2<'py, f64>,
        a: PyReadonlyArray1<'py, i64>,
        b: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (n, s) = (n.as_array(), s.as_array());
        let pos = |x: &PyReadonlyArray1<'py, i64>, name: &str| -> PyResult<Vec<usize>> {
            x.as_array()
                .iter()
                .map(|&p| usize::try_from(p).map_err(|_| to_py(py, bnpcore::Error::param(name, format!("negative position {p}")))))
                .collect()
        };
        let (a, b) = (pos(&a, "a")?, pos(&b, "b")?);
        Ok(run(py, None, || self.inner.elbo_data_per_pair(n, s, &a, &b))?.into_pyarray(py).into_any())
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
