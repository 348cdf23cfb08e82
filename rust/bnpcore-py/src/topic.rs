//! Bindings of the topic-model kernels: the document local step (`bnpcore::local::doc_topic`)
//! and the HDP allocation math (`bnpcore::alloc::hdp_topic`). Thin wrappers: extract, borrow,
//! release the GIL (through `parallel::run`), call the core, convert.
//!
//! Borrowed arrays stay valid while the GIL is released; callers must not mutate them from
//! another thread during a call.

use bnpcore::alloc::hdp_topic::{self, RhoProblem};
use bnpcore::local::doc_topic::{self, DocTopicOptions, DocTopicOutput};
use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::parallel::{run, run_inline};

/// CSR index arrays as scipy stores them (`int32` or `int64`, same dtype for both).
pub(crate) enum Csr<'py> {
    I32(PyReadonlyArray1<'py, i32>, PyReadonlyArray1<'py, i32>),
    I64(PyReadonlyArray1<'py, i64>, PyReadonlyArray1<'py, i64>),
}

pub(crate) fn extract_csr<'py>(indptr: &Bound<'py, PyAny>, indices: &Bound<'py, PyAny>) -> PyResult<Csr<'py>> {
    if let (Ok(p), Ok(i)) = (indptr.extract::<PyReadonlyArray1<i64>>(), indices.extract::<PyReadonlyArray1<i64>>()) {
        return Ok(Csr::I64(p, i));
    }
    if let (Ok(p), Ok(i)) = (indptr.extract::<PyReadonlyArray1<i32>>(), indices.extract::<PyReadonlyArray1<i32>>()) {
        return Ok(Csr::I32(p, i));
    }
    Err(PyTypeError::new_err("`indptr` and `indices` must be 1-D int32 or int64 arrays of the same dtype (scipy CSR)"))
}

fn output_dict<'py>(py: Python<'py>, out: DocTopicOutput) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("n_docs", out.n_docs)?;
    d.set_item("N", out.n.into_pyarray(py))?;
    d.set_item("S", out.s.into_pyarray(py))?;
    d.set_item("H", out.h.into_pyarray(py))?;
    d.set_item("P", out.p.into_pyarray(py))?;
    d.set_item("P_rem", out.p_rem)?;
    d.set_item("Q0", out.q0)?;
    d.set_item("Q", out.q.into_pyarray(py))?;
    d.set_item("Q_rem", out.q_rem)?;
    d.set_item("doc_usage", out.doc_usage.into_pyarray(py))?;
    d.set_item("merge_H", out.merge_h.into_pyarray(py))?;
    d.set_item("merge_P", out.merge_p.into_pyarray(py))?;
    d.set_item("merge_Q", out.merge_q.into_pyarray(py))?;
    if let Some(dt) = out.doc_topic {
        d.set_item("doc_topic", dt.into_pyarray(py))?;
    }
    d.set_item("n_iter", out.n_iter)?;
    d.set_item("n_type_passes", out.n_type_passes)?;
    d.set_item("restarts_tried", out.restarts_tried)?;
    d.set_item("restarts_accepted", out.restarts_accepted)?;
    Ok(d)
}

/// Document local step of a CSR batch reduced to the topic-model summaries (see
/// `bnpcore::local::doc_topic`). Returns a dict with `n_docs`, `N`, `S` (K × V), `H`, `P`,
/// `P_rem`, `Q0`, `Q`, `Q_rem`, `doc_usage`, `merge_H`, `merge_P`, `merge_Q`, optionally
/// `doc_topic` (D × K), and the counters `n_iter`, `n_type_passes`, `restarts_tried`,
/// `restarts_accepted`. `init_doc_topic` (D × K counts) warm-starts every
/// document from the given `N_dk` instead of the prior; `restart_mask` (D booleans) limits the
/// restart proposals to the documents it marks; `cold_mask` (D booleans) starts the documents it
/// marks from the prior despite `init_doc_topic`. `usage_threshold` defaults to
/// `DOC_USAGE_THRESHOLD`.
#[pyfunction]
#[pyo3(signature = (indptr, indices, data, exp_elog_phi, alpha_beta, *, alpha_beta_rem = None, max_iter = 100, tol = 0.05,
                    restarts = true, restart_mask = None, cold_mask = None, restart_max_trials = 25, restart_iters = 2, restart_min_mass = 0.1, top_l = None,
                    sparse_eps = 1e-3, merge_pairs = None, usage_threshold = None, return_doc_topic = false, init_doc_topic = None,
                    n_threads = None))]
fn doc_topic_step<'py>(
    py: Python<'py>,
    indptr: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    data: PyReadonlyArray1<'py, f64>,
    exp_elog_phi: PyReadonlyArray2<'py, f64>,
    alpha_beta: PyReadonlyArray1<'py, f64>,
    alpha_beta_rem: Option<f64>,
    max_iter: usize,
    tol: f64,
    restarts: bool,
    restart_mask: Option<PyReadonlyArray1<'py, bool>>,
    cold_mask: Option<PyReadonlyArray1<'py, bool>>,
    restart_max_trials: usize,
    restart_iters: usize,
    restart_min_mass: f64,
    top_l: Option<usize>,
    sparse_eps: f64,
    merge_pairs: Option<Vec<(usize, usize)>>,
    usage_threshold: Option<f64>,
    return_doc_topic: bool,
    init_doc_topic: Option<PyReadonlyArray2<'py, f64>>,
    n_threads: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = DocTopicOptions {
        max_iter,
        tol,
        restarts,
        restart_mask: restart_mask.map(|m| m.as_array().to_vec()),
        cold_mask: cold_mask.map(|m| m.as_array().to_vec()),
        restart_max_trials,
        restart_iters,
        restart_min_mass,
        top_l,
        sparse_eps,
        merge_pairs: merge_pairs.unwrap_or_default(),
        usage_threshold: usage_threshold.unwrap_or(DocTopicOptions::default().usage_threshold),
        return_doc_topic,
    };
    let (dat, tab, a) = (data.as_array(), exp_elog_phi.as_array(), alpha_beta.as_array());
    let init = init_doc_topic.as_ref().map(|x| x.as_array());
    let out = match extract_csr(indptr, indices)? {
        Csr::I32(p, i) => {
            let (p, i) = (p.as_array(), i.as_array());
            run(py, n_threads, || doc_topic::doc_topic_step_init(p, i, dat, tab, a, alpha_beta_rem, init, &opts))?
        }
        Csr::I64(p, i) => {
            let (p, i) = (p.as_array(), i.as_array());
            run(py, n_threads, || doc_topic::doc_topic_step_init(p, i, dat, tab, a, alpha_beta_rem, init, &opts))?
        }
    };
    output_dict(py, out)
}

/// `exp(E[ln φ_kv])` as a V × K table from Dirichlet parameters `lam` (K × V); with `prior`
/// (V, the prior pseudo-counts of which `lam` is the posterior) entries next to their prior
/// take a first-order digamma expansion (same values to round-off, faster).
#[pyfunction]
#[pyo3(signature = (lam, *, prior = None, n_threads = None))]
fn topic_word_table<'py>(
    py: Python<'py>,
    lam: PyReadonlyArray2<'py, f64>,
    prior: Option<PyReadonlyArray1<'py, f64>>,
    n_threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let lam = lam.as_array();
    let prior = prior.as_ref().map(|p| p.as_array());
    Ok(run(py, n_threads, || doc_topic::topic_word_table(lam, prior))?.into_pyarray(py).into_any())
}

/// `(beta, beta_rem)` from stick means `rho`.
#[pyfunction]
fn hdp_beta_from_rho<'py>(py: Python<'py>, rho: PyReadonlyArray1<'py, f64>) -> PyResult<(Bound<'py, PyAny>, f64)> {
    let rho = rho.as_array();
    let (b, rem) = run_inline(py, || hdp_topic::beta_from_rho(rho))?;
    Ok((b.into_pyarray(py).into_any(), rem))
}

/// Stick means `rho` from expected topic probabilities `beta` (Σ beta < 1).
#[pyfunction]
fn hdp_rho_from_beta<'py>(py: Python<'py>, beta: PyReadonlyArray1<'py, f64>) -> PyResult<Bound<'py, PyAny>> {
    let beta = beta.as_array();
    Ok(run_inline(py, || hdp_topic::rho_from_beta(beta))?.into_pyarray(py).into_any())
}

/// Heuristic stick totals `omega_k = D (K + 1 − k) + D + 1 + gamma`.
#[pyfunction]
fn hdp_omega(py: Python<'_>, n_docs: f64, n_components: usize, gamma: f64) -> PyResult<Bound<'_, PyAny>> {
    Ok(run_inline(py, || hdp_topic::omega_heuristic(n_docs, n_components, gamma))?.into_pyarray(py).into_any())
}

/// First-step initialisation of `rho`.
#[pyfunction]
fn hdp_rho_init(py: Python<'_>, n_docs: f64, n_components: usize, gamma: f64) -> PyResult<Bound<'_, PyAny>> {
    Ok(run_inline(py, || hdp_topic::rho_init(n_docs, n_components, gamma))?.into_pyarray(py).into_any())
}

/// `(f(rho), ∂f/∂rho)` of the rho step (single truncation; `omega=None`: heuristic).
#[pyfunction]
#[pyo3(signature = (rho, p, p_rem, n_docs, alpha, gamma, omega = None))]
fn hdp_rho_objective<'py>(
    py: Python<'py>,
    rho: PyReadonlyArray1<'py, f64>,
    p: PyReadonlyArray1<'py, f64>,
    p_rem: f64,
    n_docs: f64,
    alpha: f64,
    gamma: f64,
    omega: Option<PyReadonlyArray1<'py, f64>>,
) -> PyResult<(f64, Bound<'py, PyAny>)> {
    let (rho, p, om) = (rho.as_array(), p.as_array(), omega.as_ref().map(|o| o.as_array()));
    let (f, g) = run_inline(py, || {
        let pb = RhoProblem::single(n_docs, alpha, gamma, p, p_rem, om)?;
        Ok((pb.objective(rho)?, pb.gradient(rho)?))
    })?;
    Ok((f, g.into_pyarray(py).into_any()))
}

/// Maximise the rho objective from `rho_init`; returns a dict `rho`, `f`, `n_iter`,
/// `converged`, `omega`.
#[pyfunction]
#[pyo3(signature = (rho_init, p, p_rem, n_docs, alpha, gamma, omega = None, max_iter = 500))]
fn hdp_optimize_rho<'py>(
    py: Python<'py>,
    rho_init: PyReadonlyArray1<'py, f64>,
    p: PyReadonlyArray1<'py, f64>,
    p_rem: f64,
    n_docs: f64,
    alpha: f64,
    gamma: f64,
    omega: Option<PyReadonlyArray1<'py, f64>>,
    max_iter: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let (r0, p, om) = (rho_init.as_array(), p.as_array(), omega.as_ref().map(|o| o.as_array()));
    let (res, omega) = run_inline(py, || {
        let pb = RhoProblem::single(n_docs, alpha, gamma, p, p_rem, om)?;
        Ok((pb.optimize(r0, max_iter)?, pb.omega))
    })?;
    let d = PyDict::new(py);
    d.set_item("rho", res.rho.into_pyarray(py))?;
    d.set_item("omega", omega.into_pyarray(py))?;
    d.set_item("f", res.f)?;
    d.set_item("n_iter", res.n_iter)?;
    d.set_item("converged", res.converged)?;
    Ok(d)
}

/// Surrogate top term `L_top^sur` of the HDP objective.
#[pyfunction]
fn hdp_elbo_top(
    py: Python<'_>,
    rho: PyReadonlyArray1<'_, f64>,
    omega: PyReadonlyArray1<'_, f64>,
    n_docs: f64,
    alpha: f64,
    gamma: f64,
) -> PyResult<f64> {
    let (rho, omega) = (rho.as_array(), omega.as_array());
    run_inline(py, || hdp_topic::hdp_elbo_top(rho, omega, n_docs, alpha, gamma))
}

/// Document term `L_doc` of the HDP objective from summaries.
#[pyfunction]
fn hdp_elbo_doc(
    py: Python<'_>,
    q0: f64,
    q: PyReadonlyArray1<'_, f64>,
    q_rem: f64,
    p: PyReadonlyArray1<'_, f64>,
    p_rem: f64,
    alpha: f64,
    beta: PyReadonlyArray1<'_, f64>,
    beta_rem: f64,
) -> PyResult<f64> {
    let (q, p, beta) = (q.as_array(), p.as_array(), beta.as_array());
    run_inline(py, || hdp_topic::hdp_elbo_doc(q0, q, q_rem, p, p_rem, alpha, beta, beta_rem))
}

/// LDA document term from summaries of a step run with `alpha_beta = alpha / K`, no rem.
#[pyfunction]
fn lda_elbo_doc(
    py: Python<'_>,
    n_docs: f64,
    alpha: f64,
    q0: f64,
    q: PyReadonlyArray1<'_, f64>,
    p: PyReadonlyArray1<'_, f64>,
) -> PyResult<f64> {
    let (q, p) = (q.as_array(), p.as_array());
    run_inline(py, || hdp_topic::lda_elbo_doc(n_docs, alpha, q0, q, p))
}

/// Register the topic-model functions on the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(doc_topic_step, m)?)?;
    m.add("DOC_USAGE_THRESHOLD", DocTopicOptions::default().usage_threshold)?;
    m.add_function(wrap_pyfunction!(topic_word_table, m)?)?;
    m.add_function(wrap_pyfunction!(hdp_beta_from_rho, m)?)?;
    m.add_function(wrap_pyfunction!(hdp_rho_from_beta, m)?)?;
    m.add_function(wrap_pyfunction!(hdp_omega, m)?)?;
    m.add_function(wrap_pyfunction!(hdp_rho_init, m)?)?;
    m.add_function(wrap_pyfunction!(hdp_rho_objective, m)?)?;
    m.add_function(wrap_pyfunction!(hdp_optimize_rho, m)?)?;
    m.add_function(wrap_pyfunction!(hdp_elbo_top, m)?)?;
    m.add_function(wrap_pyfunction!(hdp_elbo_doc, m)?)?;
    m.add_function(wrap_pyfunction!(lda_elbo_doc, m)?)?;
    Ok(())
}
