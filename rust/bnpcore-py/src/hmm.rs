//! Bindings of the hidden-Markov-model kernels: forward-backward, Viterbi, the HMM local step with
//! an observation model, and the allocation math of the (sticky) HDP-HMM and the finite HMM.
//! Inputs must not be mutated by another Python thread during a call (the GIL is released).

use bnpcore::alloc::hdp_hmm::{self, HmmHyper, StickOptions};
use bnpcore::local::fwd_bwd::{self, FbOptions, FbOutput};
use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::to_py;
use crate::obs::PyObs;
use crate::parallel::{run, run_inline};

fn fb_dict<'py>(py: Python<'py>, out: FbOutput) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("N", out.n.into_pyarray(py))?;
    d.set_item("start_count", out.start_count.into_pyarray(py))?;
    d.set_item("trans_count", out.trans_count.into_pyarray(py))?;
    d.set_item("h_start", out.h_start.into_pyarray(py))?;
    d.set_item("h_trans", out.h_trans.into_pyarray(py))?;
    d.set_item("log_z", out.log_z.into_pyarray(py))?;
    d.set_item("log_z_sum", out.log_z_sum)?;
    d.set_item("n_log_space", out.n_log_space)?;
    if let Some(r) = out.resp {
        d.set_item("resp", r.into_pyarray(py))?;
    }
    if let Some(c) = out.seq_counts {
        d.set_item("seq_counts", c.into_pyarray(py))?;
    }
    d.set_item("merge_h_row", out.merge_h_row.into_pyarray(py))?;
    d.set_item("merge_h_col", out.merge_h_col.into_pyarray(py))?;
    d.set_item("merge_h_self", out.merge_h_self.into_pyarray(py))?;
    d.set_item("merge_h_start", out.merge_h_start.into_pyarray(py))?;
    Ok(d)
}

/// Forward-backward over the sequences `seq_range` of `log_lik` (T_total × K) with start and
/// transition log-potentials (used as given, never renormalised). Returns a dict with `N`,
/// `start_count`, `trans_count`, `h_start`, `h_trans`, `log_z` (per sequence), `log_z_sum`,
/// `n_log_space`, the merge tables `merge_h_row`, `merge_h_col` (n_pairs × K), `merge_h_self`,
/// `merge_h_start` (n_pairs) of `merge_pairs`, and optionally `resp` and `seq_counts` (n_seqs × K).
#[pyfunction]
#[pyo3(signature = (log_lik, seq_range, log_start, log_trans, *, return_resp = false, return_seq_counts = false,
                    merge_pairs = None, log_space = false, n_threads = None))]
fn forward_backward<'py>(
    py: Python<'py>,
    log_lik: PyReadonlyArray2<'py, f64>,
    seq_range: PyReadonlyArray1<'py, i64>,
    log_start: PyReadonlyArray1<'py, f64>,
    log_trans: PyReadonlyArray2<'py, f64>,
    return_resp: bool,
    return_seq_counts: bool,
    merge_pairs: Option<Vec<(usize, usize)>>,
    log_space: bool,
    n_threads: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    let (c, sr, p0, p) = (log_lik.as_array(), seq_range.as_array(), log_start.as_array(), log_trans.as_array());
    let opts = FbOptions { return_resp, log_space, return_seq_counts, merge_pairs: merge_pairs.unwrap_or_default() };
    let out = run(py, n_threads, || fwd_bwd::forward_backward(c, sr, p0, p, &opts))?;
    fb_dict(py, out)
}

/// MAP state paths: `(states int64 (T_total,), score (n_seqs,))`.
#[pyfunction]
#[pyo3(signature = (log_lik, seq_range, log_start, log_trans, *, n_threads = None))]
fn viterbi<'py>(
    py: Python<'py>,
    log_lik: PyReadonlyArray2<'py, f64>,
    seq_range: PyReadonlyArray1<'py, i64>,
    log_start: PyReadonlyArray1<'py, f64>,
    log_trans: PyReadonlyArray2<'py, f64>,
    n_threads: Option<usize>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let (c, sr, p0, p) = (log_lik.as_array(), seq_range.as_array(), log_start.as_array(), log_trans.as_array());
    let out = run(py, n_threads, || fwd_bwd::viterbi(c, sr, p0, p))?;
    Ok((out.states.into_pyarray(py).into_any(), out.score.into_pyarray(py).into_any()))
}

/// HMM local step of a batch for an observation model: the forward-backward dict plus `S`
/// (observation statistics of the marginals) and `h_sum`.
#[pyfunction]
#[pyo3(signature = (obs, x, n_post, s_post, seq_range, log_start, log_trans, *, return_resp = false, return_seq_counts = false,
                    merge_pairs = None, n_threads = None))]
fn hmm_local_step<'py>(
    py: Python<'py>,
    obs: &PyObs,
    x: PyReadonlyArray2<'py, f64>,
    n_post: PyReadonlyArray1<'py, f64>,
    s_post: PyReadonlyArray2<'py, f64>,
    seq_range: PyReadonlyArray1<'py, i64>,
    log_start: PyReadonlyArray1<'py, f64>,
    log_trans: PyReadonlyArray2<'py, f64>,
    return_resp: bool,
    return_seq_counts: bool,
    merge_pairs: Option<Vec<(usize, usize)>>,
    n_threads: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    let (x, n, s, sr) = (x.as_array(), n_post.as_array(), s_post.as_array(), seq_range.as_array());
    let (p0, p) = (log_start.as_array(), log_trans.as_array());
    let opts = FbOptions { return_resp, log_space: false, return_seq_counts, merge_pairs: merge_pairs.unwrap_or_default() };
    let out = run(py, n_threads, || fwd_bwd::local_step_obs(&obs.inner, x, n, s, sr, p0, p, &opts))?;
    let d = fb_dict(py, out.fb)?;
    d.set_item("S", out.s.into_pyarray(py))?;
    d.set_item("h_sum", out.h_sum)?;
    Ok(d)
}

fn hyper(alpha: f64, start_alpha: f64, kappa: f64, gamma: f64) -> HmmHyper {
    HmmHyper { alpha, start_alpha, kappa, gamma }
}

fn stick_options(py: Python<'_>, omega_update: &str) -> PyResult<StickOptions> {
    match omega_update {
        "optimize" => Ok(StickOptions { heuristic_omega: false, ..StickOptions::default() }),
        "heuristic" => Ok(StickOptions { heuristic_omega: true, ..StickOptions::default() }),
        other => Err(to_py(py, bnpcore::Error::param("omega_update", format!("expected \"optimize\" or \"heuristic\", got {other:?}")))),
    }
}

/// Complete allocation global step of the HDP-HMM: dict with `theta` ((K+1)×(K+1)), `u`, `omega`
/// and `e_log_pi` (E[ln π] of `theta`): `n_iters` alternating rounds, then with `profile` the
/// joint optimum of the sticks with `theta` profiled out.
#[pyfunction]
#[pyo3(signature = (start_count, trans_count, u, omega, *, alpha, start_alpha, kappa, gamma, n_iters = 1, profile = false, omega_update = "optimize"))]
fn hmm_global_step<'py>(
    py: Python<'py>,
    start_count: PyReadonlyArray1<'py, f64>,
    trans_count: PyReadonlyArray2<'py, f64>,
    u: PyReadonlyArray1<'py, f64>,
    omega: PyReadonlyArray1<'py, f64>,
    alpha: f64,
    start_alpha: f64,
    kappa: f64,
    gamma: f64,
    n_iters: usize,
    profile: bool,
    omega_update: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = stick_options(py, omega_update)?;
    let h = hyper(alpha, start_alpha, kappa, gamma);
    let (m0, m, u, o) = (start_count.as_array(), trans_count.as_array(), u.as_array(), omega.as_array());
    let g = run_inline(py, || hdp_hmm::hdp_global_step(m0, m, u, o, &h, n_iters, profile, opts))?;
    let d = PyDict::new(py);
    d.set_item("theta", g.theta.into_pyarray(py))?;
    d.set_item("u", g.u.into_pyarray(py))?;
    d.set_item("omega", g.omega.into_pyarray(py))?;
    d.set_item("e_log_pi", g.e_log_pi.into_pyarray(py))?;
    Ok(d)
}

/// θ̂ of the HDP-HMM ((K+1)×(K+1)) for counts and stick means `u`.
#[pyfunction]
#[pyo3(signature = (start_count, trans_count, u, *, alpha, start_alpha, kappa, gamma))]
fn hmm_theta<'py>(
    py: Python<'py>,
    start_count: PyReadonlyArray1<'py, f64>,
    trans_count: PyReadonlyArray2<'py, f64>,
    u: PyReadonlyArray1<'py, f64>,
    alpha: f64,
    start_alpha: f64,
    kappa: f64,
    gamma: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let h = hyper(alpha, start_alpha, kappa, gamma);
    let (m0, m, u) = (start_count.as_array(), trans_count.as_array(), u.as_array());
    Ok(run_inline(py, || hdp_hmm::hdp_theta(m0, m, u, &h))?.into_pyarray(py).into_any())
}

/// E[ln π] row by row for a table of Dirichlet parameters.
#[pyfunction]
fn hmm_e_log_pi<'py>(py: Python<'py>, theta: PyReadonlyArray2<'py, f64>) -> PyResult<Bound<'py, PyAny>> {
    let th = theta.as_array();
    Ok(run_inline(py, || hdp_hmm::e_log_pi_table(th))?.into_pyarray(py).into_any())
}

/// Initial stick means giving K equal state weights.
#[pyfunction]
fn hmm_init_u<'py>(py: Python<'py>, n_components: usize) -> Bound<'py, PyAny> {
    hdp_hmm::init_u(n_components).into_pyarray(py).into_any()
}

/// Top-level objective f(u, ω) and its gradient `(f, df/du, df/dω)` for a fixed E[ln π] table.
#[pyfunction]
#[pyo3(signature = (u, omega, e_log_pi, *, alpha, start_alpha, kappa, gamma))]
fn hmm_top_objective<'py>(
    py: Python<'py>,
    u: PyReadonlyArray1<'py, f64>,
    omega: PyReadonlyArray1<'py, f64>,
    e_log_pi: PyReadonlyArray2<'py, f64>,
    alpha: f64,
    start_alpha: f64,
    kappa: f64,
    gamma: f64,
) -> PyResult<(f64, Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let h = hyper(alpha, start_alpha, kappa, gamma);
    let (u, o, p) = (u.as_array(), omega.as_array(), e_log_pi.as_array());
    let (f, gu, go) = run_inline(py, || hdp_hmm::top_objective(u, o, p, &h))?;
    Ok((f, gu.into_pyarray(py).into_any(), go.into_pyarray(py).into_any()))
}

/// Maximise f(u, ω) from `(u, omega)` for a fixed E[ln π] table: `(u, omega)`.
#[pyfunction]
#[pyo3(signature = (u, omega, e_log_pi, *, alpha, start_alpha, kappa, gamma, omega_update = "optimize"))]
fn hmm_optimize_sticks<'py>(
    py: Python<'py>,
    u: PyReadonlyArray1<'py, f64>,
    omega: PyReadonlyArray1<'py, f64>,
    e_log_pi: PyReadonlyArray2<'py, f64>,
    alpha: f64,
    start_alpha: f64,
    kappa: f64,
    gamma: f64,
    omega_update: &str,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let opts = stick_options(py, omega_update)?;
    let h = hyper(alpha, start_alpha, kappa, gamma);
    let (u, o, p) = (u.as_array(), omega.as_array(), e_log_pi.as_array());
    let (nu, no) = run_inline(py, || hdp_hmm::optimize_sticks(u, o, p, &h, opts))?;
    Ok((nu.into_pyarray(py).into_any(), no.into_pyarray(py).into_any()))
}

fn elbo_dict<'py>(py: Python<'py>, e: hdp_hmm::AllocElbo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("entropy", e.entropy)?;
    d.set_item("trans", e.trans)?;
    d.set_item("top", e.top)?;
    d.set_item("total", e.total)?;
    Ok(d)
}

/// Allocation part of the HDP-HMM objective from summaries: dict with `entropy`, `trans`, `top`,
/// `total`.
#[pyfunction]
#[pyo3(signature = (start_count, trans_count, h_start, h_trans, theta, u, omega, *, alpha, start_alpha, kappa, gamma))]
fn hmm_elbo_alloc<'py>(
    py: Python<'py>,
    start_count: PyReadonlyArray1<'py, f64>,
    trans_count: PyReadonlyArray2<'py, f64>,
    h_start: PyReadonlyArray1<'py, f64>,
    h_trans: PyReadonlyArray2<'py, f64>,
    theta: PyReadonlyArray2<'py, f64>,
    u: PyReadonlyArray1<'py, f64>,
    omega: PyReadonlyArray1<'py, f64>,
    alpha: f64,
    start_alpha: f64,
    kappa: f64,
    gamma: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let h = hyper(alpha, start_alpha, kappa, gamma);
    let (m0, m, h0, ht) = (start_count.as_array(), trans_count.as_array(), h_start.as_array(), h_trans.as_array());
    let (th, u, o) = (theta.as_array(), u.as_array(), omega.as_array());
    let e = run_inline(py, || hdp_hmm::hdp_elbo_alloc(m0, m, h0, ht, th, u, o, &h))?;
    elbo_dict(py, e)
}

/// θ̂ of the finite HMM ((K+1)×K): symmetric Dirichlet prior rows plus counts.
#[pyfunction]
#[pyo3(signature = (start_count, trans_count, *, alpha, start_alpha, kappa))]
fn finite_hmm_theta<'py>(
    py: Python<'py>,
    start_count: PyReadonlyArray1<'py, f64>,
    trans_count: PyReadonlyArray2<'py, f64>,
    alpha: f64,
    start_alpha: f64,
    kappa: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let h = hyper(alpha, start_alpha, kappa, 1.0);
    let (m0, m) = (start_count.as_array(), trans_count.as_array());
    Ok(run_inline(py, || hdp_hmm::finite_hmm_theta(m0, m, &h))?.into_pyarray(py).into_any())
}

/// Allocation part of the finite-HMM objective from summaries (dict as `hmm_elbo_alloc`, `top` = 0).
#[pyfunction]
#[pyo3(signature = (start_count, trans_count, h_start, h_trans, theta, *, alpha, start_alpha, kappa))]
fn finite_hmm_elbo_alloc<'py>(
    py: Python<'py>,
    start_count: PyReadonlyArray1<'py, f64>,
    trans_count: PyReadonlyArray2<'py, f64>,
    h_start: PyReadonlyArray1<'py, f64>,
    h_trans: PyReadonlyArray2<'py, f64>,
    theta: PyReadonlyArray2<'py, f64>,
    alpha: f64,
    start_alpha: f64,
    kappa: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let h = hyper(alpha, start_alpha, kappa, 1.0);
    let (m0, m, h0, ht, th) = (start_count.as_array(), trans_count.as_array(), h_start.as_array(), h_trans.as_array(), theta.as_array());
    let e = run_inline(py, || hdp_hmm::finite_hmm_elbo_alloc(m0, m, h0, ht, th, &h))?;
    elbo_dict(py, e)
}

/// Register the HMM functions on the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(forward_backward, m)?)?;
    m.add_function(wrap_pyfunction!(viterbi, m)?)?;
    m.add_function(wrap_pyfunction!(hmm_local_step, m)?)?;
    m.add_function(wrap_pyfunction!(hmm_global_step, m)?)?;
    m.add_function(wrap_pyfunction!(hmm_theta, m)?)?;
    m.add_function(wrap_pyfunction!(hmm_e_log_pi, m)?)?;
    m.add_function(wrap_pyfunction!(hmm_init_u, m)?)?;
    m.add_function(wrap_pyfunction!(hmm_top_objective, m)?)?;
    m.add_function(wrap_pyfunction!(hmm_optimize_sticks, m)?)?;
    m.add_function(wrap_pyfunction!(hmm_elbo_alloc, m)?)?;
    m.add_function(wrap_pyfunction!(finite_hmm_theta, m)?)?;
    m.add_function(wrap_pyfunction!(finite_hmm_elbo_alloc, m)?)?;
    Ok(())
}
