//! Bindings of `bnpcore::special`, exposed for tests.

use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;

/// Digamma (vectorised), exposed for tests.
#[pyfunction]
pub(crate) fn digamma<'py>(py: Python<'py>, x: PyReadonlyArray1<'py, f64>) -> Bound<'py, PyAny> {
    x.as_array().mapv(bnpcore::special::digamma).into_pyarray(py).into_any()
}
