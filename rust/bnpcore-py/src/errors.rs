//! The only place where core errors become Python exceptions. The exception classes live in
//! `bnpcore.exceptions` (so that they can derive from `ValueError`, `ArithmeticError`, ...).

use bnpcore::Error;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

fn class<'py>(py: Python<'py>, name: &str) -> Option<Bound<'py, PyAny>> {
    py.import("bnpcore.exceptions").ok()?.getattr(name).ok()
}

/// Convert a core error into the matching `bnpcore.exceptions` class.
pub fn to_py(py: Python<'_>, err: Error) -> PyErr {
    let name = match &err {
        Error::Shape { .. } => "ShapeError",
        Error::InvalidParam { .. } => "ParameterError",
        Error::NonFinite { .. } => "NonFiniteError",
        Error::InvalidData { .. } => "DataError",
        Error::NotPositiveDefinite { .. } | Error::Numerical { .. } => "NumericalError",
    };
    let msg = err.to_string();
    match class(py, name) {
        Some(cls) => match cls.call1((msg.clone(),)) {
            Ok(obj) => PyErr::from_value(obj),
            Err(e) => e,
        },
        None => PyValueError::new_err(msg),
    }
}

/// A Rust panic caught at the boundary: reported as a `RuntimeError`, never as
/// `PanicException` (which derives from `BaseException`).
pub fn panic_to_py(payload: Box<dyn std::any::Any + Send>) -> PyErr {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    PyRuntimeError::new_err(format!("bnpcore internal error (please report it): {msg}"))
}
