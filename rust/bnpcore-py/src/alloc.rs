//! Bindings of `bnpcore::alloc`: the `Alloc` class (an allocation model and its
//! hyperparameters). Python builds one per model from its hyperparameters and passes it to every
//! call that needs `E[ln π]`, so the allocation math lives in the core only.

use bnpcore::alloc::Alloc;
use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;

use crate::errors::to_py;
use crate::parallel::run_inline;

/// An allocation model (kind + hyperparameters). Immutable.
#[pyclass(name = "Alloc", frozen, module = "bnpcore._core")]
pub(crate) struct PyAlloc {
    pub(crate) inner: Alloc,
}

#[pymethods]
impl PyAlloc {
    /// `Alloc("dp", gamma)` (stick-breaking DP mixture) or `Alloc("finite", gamma)` (symmetric
    /// Dirichlet(γ/K) mixture).
    #[new]
    #[pyo3(signature = (kind, gamma))]
    fn new(py: Python<'_>, kind: &str, gamma: f64) -> PyResult<Self> {
        let inner = match kind {
            "dp" => Alloc::Dp { gamma },
            "finite" => Alloc::Finite { gamma },
            other => {
                let reason = format!("unknown allocation model {other:?}; expected \"dp\" or \"finite\" (or Alloc.fixed)");
                return Err(to_py(py, bnpcore::Error::param("kind", reason)));
            }
        };
        inner.check().map_err(|e| to_py(py, e))?;
        Ok(PyAlloc { inner })
    }

    /// Given log weights `E[ln π_k]` used whatever the counts; allocation ELBO term 0.
    #[staticmethod]
    fn fixed(log_weights: PyReadonlyArray1<'_, f64>) -> Self {
        PyAlloc { inner: Alloc::Fixed { log_weights: log_weights.as_array().to_owned() } }
    }

    /// `"dp"`, `"finite"` or `"fixed"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    /// Concentration `γ` (None for a fixed model).
    #[getter]
    fn gamma(&self) -> Option<f64> {
        self.inner.gamma()
    }

    /// `E[ln π_k]` for counts `n`.
    fn e_log_pi<'py>(&self, py: Python<'py>, n: PyReadonlyArray1<'py, f64>) -> PyResult<Bound<'py, PyAny>> {
        let n = n.as_array();
        Ok(run_inline(py, || self.inner.e_log_pi(n))?.into_pyarray(py).into_any())
    }

    /// `E[π_k]` for counts `n`.
    fn e_pi<'py>(&self, py: Python<'py>, n: PyReadonlyArray1<'py, f64>) -> PyResult<Bound<'py, PyAny>> {
        let n = n.as_array();
        Ok(run_inline(py, || self.inner.e_pi(n))?.into_pyarray(py).into_any())
    }

    /// Allocation ELBO term for counts `n`.
    fn elbo(&self, py: Python<'_>, n: PyReadonlyArray1<'_, f64>) -> PyResult<f64> {
        let n = n.as_array();
        run_inline(py, || self.inner.elbo(n))
    }

    /// Exact allocation ΔELBO of merging every pair `i < j` (K × K, `-inf` off the strict upper
    /// triangle).
    fn merge_delta<'py>(&self, py: Python<'py>, n: PyReadonlyArray1<'py, f64>) -> PyResult<Bound<'py, PyAny>> {
        let n = n.as_array();
        Ok(run_inline(py, || self.inner.merge_delta(n))?.into_pyarray(py).into_any())
    }

    fn __repr__(&self) -> String {
        match self.inner.gamma() {
            Some(g) => format!("Alloc({:?}, gamma={g})", self.inner.kind()),
            None => "Alloc.fixed(...)".to_string(),
        }
    }
}
