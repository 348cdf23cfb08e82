//! Bindings of truncation-free SVI (`bnpcore::tfsvi`): one minibatch of the locally collapsed
//! Gibbs step (HDP topic model or DP mixture of multinomials) and the samplers, exposed for the
//! tests' reference comparisons. Thin wrappers: extract, borrow, release the GIL, call, convert.

use bnpcore::tfsvi::{self, Rng, TfBatchOutput, TfParams};
use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::parallel::{run, run_inline, run_on_caller};
use crate::topic::{extract_csr, Csr};

fn output_dict<'py>(py: Python<'py>, out: TfBatchOutput) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("n_components", out.n_components)?;
    d.set_item("n_new", out.n_new)?;
    d.set_item("topic", out.topic.into_pyarray(py))?;
    d.set_item("word", out.word.into_pyarray(py))?;
    d.set_item("count", out.count.into_pyarray(py))?;
    d.set_item("stick_counts", out.stick_counts.into_pyarray(py))?;
    d.set_item("tokens", out.tokens.into_pyarray(py))?;
    d.set_item("assignments", out.assignments.into_pyarray(py))?;
    Ok(d)
}

/// One truncation-free SVI minibatch (`kind` = `"hdp"` or `"dp_mult"`): documents `docs`
/// (row ids) of the CSR corpus, global factors `λ = eta + scale · mass` (T × V, row sums
/// `mass_sum`) and sticks `Beta(u, v)`. Returns a dict with `n_components`, `n_new`, the
/// sparse counts `topic`, `word`, `count`, per component `stick_counts` (HDP: table counts;
/// DP: documents) and `tokens`, and (DP) `assignments`.
#[pyfunction]
#[pyo3(signature = (kind, indptr, indices, data, docs, mass, mass_sum, scale, u, v, *, eta, gamma, alpha = 1.0, n_sweeps = 5, seed = 0, n_threads = None))]
fn tfsvi_batch<'py>(
    py: Python<'py>,
    kind: &str,
    indptr: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    data: PyReadonlyArray1<'py, f64>,
    docs: PyReadonlyArray1<'py, i64>,
    mass: PyReadonlyArray2<'py, f64>,
    mass_sum: PyReadonlyArray1<'py, f64>,
    scale: f64,
    u: PyReadonlyArray1<'py, f64>,
    v: PyReadonlyArray1<'py, f64>,
    eta: f64,
    gamma: f64,
    alpha: f64,
    n_sweeps: usize,
    seed: u64,
    n_threads: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    let p = TfParams { eta, gamma, alpha, n_sweeps, seed };
    let hdp = match kind {
        "hdp" => true,
        "dp_mult" => false,
        _ => return Err(crate::errors::to_py(py, bnpcore::Error::param("kind", format!("must be 'hdp' or 'dp_mult', got {kind:?}")))),
    };
    let (dat, dv, m, ms, uu, vv) = (data.as_array(), docs.as_array(), mass.as_array(), mass_sum.as_array(), u.as_array(), v.as_array());
    // an HDP minibatch of a few documents is sequential work: no hand-over to the pool. The DP
    // mixture's minibatch splits its per-component loops across threads whatever its size, so it
    // always runs in bnpcore's pool (`n_threads`; the pool a forked child renews — rayon's
    // global pool has no threads in a forked child, where such a loop would wait forever)
    let small = hdp && dv.len() < tfsvi::PAR_MIN_DOCS;
    macro_rules! call {
        ($ip:expr, $ind:expr) => {{
            let (ip, ind) = ($ip, $ind);
            let f = || {
                if hdp {
                    tfsvi::hdp_batch(ip, ind, dat, dv, m, ms, scale, uu, vv, &p)
                } else {
                    tfsvi::dp_mult_batch(ip, ind, dat, dv, m, ms, scale, uu, vv, &p)
                }
            };
            if small {
                if n_threads == Some(0) {
                    return Err(crate::errors::to_py(py, bnpcore::Error::param("n_threads", "must be >= 1 or None, got 0")));
                }
                run_on_caller(py, f)?
            } else {
                run(py, n_threads, f)?
            }
        }};
    }
    let out = match extract_csr(indptr, indices)? {
        Csr::I32(ip, ind) => call!(ip.as_array(), ind.as_array()),
        Csr::I64(ip, ind) => call!(ip.as_array(), ind.as_array()),
    };
    output_dict(py, out)
}

/// `n_draws` draws of the Antoniak table count for `n` customers and concentration `c` from
/// one stream seeded by `seed`.
#[pyfunction]
fn antoniak_draws(py: Python<'_>, n: u64, c: f64, n_draws: usize, seed: u64) -> PyResult<Bound<'_, PyAny>> {
    let out = run_inline(py, || {
        if !(c > 0.0) || !c.is_finite() {
            return Err(bnpcore::Error::param("c", format!("must be finite and > 0, got {c}")));
        }
        let mut r = Rng::new(seed);
        Ok((0..n_draws).map(|_| tfsvi::antoniak(n, c, &mut r)).collect::<Vec<u64>>())
    })?;
    Ok(out.into_pyarray(py).into_any())
}

/// Draws of the truncation-free SVI generator seeded by `seed` (tests): `what` = `"u64"`
/// (raw bits), `"uniform"`, `"normal"` or `"beta"` (with parameters `a`, `b`).
#[pyfunction]
#[pyo3(signature = (seed, what, n, a = 1.0, b = 1.0))]
fn tfsvi_rng_draws<'py>(py: Python<'py>, seed: u64, what: &str, n: usize, a: f64, b: f64) -> PyResult<Bound<'py, PyAny>> {
    let mut r = Rng::new(seed);
    match what {
        "u64" => Ok((0..n).map(|_| r.next_u64()).collect::<Vec<u64>>().into_pyarray(py).into_any()),
        "uniform" => Ok((0..n).map(|_| r.uniform()).collect::<Vec<f64>>().into_pyarray(py).into_any()),
        "normal" => Ok((0..n).map(|_| r.normal()).collect::<Vec<f64>>().into_pyarray(py).into_any()),
        "beta" => {
            if !(a > 0.0 && b > 0.0 && a.is_finite() && b.is_finite()) {
                return Err(crate::errors::to_py(py, bnpcore::Error::param("a/b", "must be finite and > 0")));
            }
            Ok((0..n).map(|_| r.beta(a, b)).collect::<Vec<f64>>().into_pyarray(py).into_any())
        }
        _ => Err(crate::errors::to_py(py, bnpcore::Error::param("what", format!("unknown draw kind {what:?}")))),
    }
}

/// Register the truncation-free SVI functions on the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tfsvi_batch, m)?)?;
    m.add("TF_MAX_BATCH_TOKENS", bnpcore::tfsvi::MAX_BATCH_TOKENS)?;
    m.add_function(wrap_pyfunction!(antoniak_draws, m)?)?;
    m.add_function(wrap_pyfunction!(tfsvi_rng_draws, m)?)?;
    Ok(())
}
