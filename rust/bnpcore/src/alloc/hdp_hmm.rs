//! Allocation math of the (sticky) HDP hidden Markov model and of the finite HMM (Hughes thesis
//! §6.2–§6.3, Eq. 6.26–6.47; Hughes, Stephenson & Sudderth, NIPS 2015).
//!
//! # Variational family
//!
//! `q(u_k) = Beta(û_k ω̂_k, (1 − û_k) ω̂_k)` for the top-level sticks (`β = π^G(u)`, stick-breaking,
//! `β_{K+1} = Π_k (1 − u_k)` the inactive remainder); `q(π_j) = Dir(θ̂_j)` for the start row `j = 0`
//! and the state rows `j = 1..K`, each over `K + 1` entries (the last one aggregates the inactive
//! states). Arrays are 0-based: `theta` is `(K+1) × (K+1)`, row 0 the start row, column `K` the
//! remainder.
//!
//! # Global step
//!
//! * `θ̂_jℓ = M_jℓ + α_j β_ℓ(û) + κ [j ≥ 1] δ_jℓ` with `α_0` the start concentration, `α_j = α`
//!   otherwise, and `κ` only on the state rows (thesis Eq. 6.39–6.40; the start row gets no `κ`);
//! * `(û, ω̂)` maximise (thesis Eq. 6.41–6.47)
//!   `f = Σ_k [−c_Beta(a_k, b_k) + A_k(ψ(a_k) − ψ(ω̂_k)) + B_k(ψ(b_k) − ψ(ω̂_k))] + Σ_ℓ β_ℓ(û) W_ℓ`
//!   with `a_k = û_k ω̂_k`, `b_k = (1 − û_k) ω̂_k`, `A_k = a¹_k − a_k`, `B_k = a⁰_k − b_k`,
//!   `W_ℓ = α_0 P_0ℓ + α Σ_{j≥1} P_jℓ + (ln(α+κ) − ln κ)[κ > 0][ℓ ≤ K]` and `P = E_q[ln π]`.
//!   The coefficients are `a¹_k = K + 2`, `a⁰_k = (K+1)(K+1−k) + γ` for `κ = 0` and
//!   `a¹_k = K + 1`, `a⁰_k = K(K+1−k) + 1 + γ` for `κ > 0` (1-based `k`). The `+1` in the sticky
//!   `a⁰` is the start row's contribution, missing from the printed Eq. 6.33/6.47: counting the
//!   `ln(1 − u_k)` terms of the `K` state-row bounds and the start-row bound gives
//!   `Σ_{j=1}^K [(K+1−k) − [k<j]] + (K+1−k) = K(K+1−k) + 1`.
//!   Optimised by L-BFGS over `(logit û, ln ω̂)` with the analytic gradient; the result is never
//!   worse than the starting point.
//!
//! # Objective terms (from summaries only)
//!
//! * entropy `Σ_k H^start_k + Σ_jk H_jk`;
//! * transitions (thesis Eq. 6.26–6.27):
//!   `Σ_{j=0}^K [−c_Dir(θ̂_j) + Σ_ℓ (M_jℓ + α_j β_ℓ + κ[j≥1]δ_jℓ − θ̂_jℓ) P_jℓ]`;
//! * top-level surrogate (thesis Eq. 6.28; sticky Eq. 6.33 corrected as above), with the bound
//!   `c_Dir(α b) ≥ K ln α + Σ_ℓ ln b_ℓ` (and its sticky form with the concavity step):
//!   `K ln α_0 + K² ln α + 1{κ>0} (K(ln κ − ln(α+κ)) + (ln(α+κ) − ln κ) Σ_{k≤K} β_k)`
//!   `+ Σ_k [c_Beta(1, γ) − c_Beta(a_k, b_k) + (a¹_k − a_k) E ln u_k + (a⁰_k − b_k) E ln(1 − u_k)]`.
//!
//! # Finite HMM
//!
//! `π_0 ~ Dir(α_0/K · 1)`, `π_j ~ Dir(α/K · 1 + κ δ_j)` over the `K` states (symmetric Dirichlet
//! rows, the finite-mixture convention `γ/K`); `θ̂ = prior + counts` (`(K+1) × K`), and the
//! transition term `Σ_j [c_Dir(prior_j) − c_Dir(θ̂_j) + Σ_ℓ (prior_jℓ + M_jℓ − θ̂_jℓ) P_jℓ]`.

use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2};

use crate::error::{Error, Result};
use crate::special::{c_beta, c_dir, digamma, trigamma};

/// Bounds on `û` after optimisation (as the reference implementation's `EPS`).
pub const U_EPS: f64 = 1e-8;

/// Hyperparameters of the transition model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HmmHyper {
    /// transition concentration `α > 0`
    pub alpha: f64,
    /// start-state concentration `α_0 > 0`
    pub start_alpha: f64,
    /// sticky self-transition mass `κ ≥ 0`
    pub kappa: f64,
    /// top-level concentration `γ > 0` (unused by the finite HMM)
    pub gamma: f64,
}

impl HmmHyper {
    /// Check the domains.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] naming the parameter.
    pub fn check(&self) -> Result<()> {
        for (name, v) in [("alpha", self.alpha), ("start_alpha", self.start_alpha), ("gamma", self.gamma)] {
            if !(v > 0.0) || !v.is_finite() {
                return Err(Error::param(name, format!("must be finite and > 0, got {v}")));
            }
        }
        if !(self.kappa >= 0.0) || !self.kappa.is_finite() {
            return Err(Error::param("kappa", format!("must be finite and >= 0, got {}", self.kappa)));
        }
        Ok(())
    }
}

fn check_counts(start_count: ArrayView1<f64>, trans_count: ArrayView2<f64>) -> Result<usize> {
    let k = start_count.len();
    if trans_count.dim() != (k, k) {
        return Err(Error::shape("trans_count", format!("({k}, {k})"), format!("{:?}", trans_count.dim())));
    }
    if start_count.iter().chain(trans_count.iter()).any(|v| !v.is_finite()) {
        return Err(Error::NonFinite { what: "`start_count`/`trans_count`".into() });
    }
    Ok(k)
}

fn check_sticks(u: ArrayView1<f64>, omega: ArrayView1<f64>, k: usize) -> Result<()> {
    if u.len() != k {
        return Err(Error::shape("u", format!("({k},)"), format!("({},)", u.len())));
    }
    if omega.len() != k {
        return Err(Error::shape("omega", format!("({k},)"), format!("({},)", omega.len())));
    }
    if u.iter().any(|&v| !(v > 0.0 && v < 1.0)) {
        return Err(Error::param("u", "stick means must lie in (0, 1)"));
    }
    if omega.iter().any(|&v| !(v > 0.0) || !v.is_finite()) {
        return Err(Error::param("omega", "stick concentrations must be finite and > 0"));
    }
    Ok(())
}

/// `β = π^G(û)`: `β_k = û_k Π_{m<k}(1 − û_m)` and the remainder `β_{K+1} = Π_m (1 − û_m)`
/// (length `K + 1`).
pub fn stick_pi(u: ArrayView1<f64>) -> Array1<f64> {
    let k = u.len();
    let mut out = Array1::zeros(k + 1);
    let mut rest = 1.0;
    for i in 0..k {
        out[i] = u[i] * rest;
        rest *= 1.0 - u[i];
    }
    out[k] = rest;
    out
}

/// Initial stick means giving equal weights `(1 − r)/K` to the `K` states, remainder
/// `r = min(0.1, 1/K²)`: `û_k = (1 − r)/(K − (1 − r)(k − 1))` (1-based `k`).
pub fn init_u(k: usize) -> Array1<f64> {
    let kf = k as f64;
    let r = if k == 0 { 0.1 } else { (1.0 / (kf * kf)).min(0.1) };
    Array1::from_iter((0..k).map(|i| ((1.0 - r) / (kf - (1.0 - r) * i as f64)).clamp(U_EPS, 1.0 - U_EPS)))
}

/// Optimal Dirichlet parameters `θ̂` (`(K+1) × (K+1)`, row 0 = start row, column `K` =
/// remainder) for counts `M0` (`K`), `M` (`K × K`) and stick means `û`. Negative round-off in the
/// counts is clamped to 0 here, where they are read.
///
/// # Errors
/// Shape/finiteness errors, invalid hyperparameters or sticks.
pub fn hdp_theta(start_count: ArrayView1<f64>, trans_count: ArrayView2<f64>, u: ArrayView1<f64>, hyp: &HmmHyper) -> Result<Array2<f64>> {
    hyp.check()?;
    let k = check_counts(start_count, trans_count)?;
    if u.len() != k {
        return Err(Error::shape("u", format!("({k},)"), format!("({},)", u.len())));
    }
    if u.iter().any(|&v| !(v > 0.0 && v < 1.0)) {
        return Err(Error::param("u", "stick means must lie in (0, 1)"));
    }
    let beta = stick_pi(u);
    let mut th = Array2::zeros((k + 1, k + 1));
    for j in 0..=k {
        let aj = if j == 0 { hyp.start_alpha } else { hyp.alpha };
        for l in 0..=k {
            let cnt = if l == k {
                0.0
            } else if j == 0 {
                start_count[l].max(0.0)
            } else {
                trans_count[[j - 1, l]].max(0.0)
            };
            let sticky = if j >= 1 && l == j - 1 { hyp.kappa } else { 0.0 };
            th[[j, l]] = cnt + aj * beta[l] + sticky;
        }
    }
    Ok(th)
}

/// `P_jℓ = E_q[ln π_jℓ] = ψ(θ̂_jℓ) − ψ(Σ_m θ̂_jm)` for every row of a Dirichlet table.
///
/// # Errors
/// [`Error::InvalidParam`] if an entry is not finite and > 0.
pub fn e_log_pi_table(theta: ArrayView2<f64>) -> Result<Array2<f64>> {
    if theta.iter().any(|&v| !(v > 0.0) || !v.is_finite()) {
        return Err(Error::param("theta", "Dirichlet parameters must be finite and > 0"));
    }
    let mut out = Array2::zeros(theta.dim());
    for (j, row) in theta.rows().into_iter().enumerate() {
        let t = digamma(row.sum());
        for (l, &v) in row.iter().enumerate() {
            out[[j, l]] = digamma(v) - t;
        }
    }
    Ok(out)
}

/// Coefficients `(a¹, a⁰)` of the top-level surrogate (see the module docs; sticky branch when
/// `κ > 0`, with the start row's `+1`).
pub fn top_coefs(k: usize, hyp: &HmmHyper) -> (Array1<f64>, Array1<f64>) {
    let kf = k as f64;
    if hyp.kappa > 0.0 {
        (Array1::from_elem(k, kf + 1.0), Array1::from_iter((1..=k).map(|i| kf * (kf + 1.0 - i as f64) + 1.0 + hyp.gamma)))
    } else {
        (Array1::from_elem(k, kf + 2.0), Array1::from_iter((1..=k).map(|i| (kf + 1.0) * (kf + 1.0 - i as f64) + hyp.gamma)))
    }
}

/// Linear weights `W_ℓ` (`K + 1`) of `β` in the `(û, ω̂)` objective, from the table `P`
/// (`(K+1) × (K+1)`).
fn linear_weights(p: ArrayView2<f64>, hyp: &HmmHyper) -> Array1<f64> {
    let k = p.nrows() - 1;
    let mut w = Array1::zeros(k + 1);
    for l in 0..=k {
        let mut s = 0.0;
        for j in 1..=k {
            s += p[[j, l]];
        }
        w[l] = hyp.start_alpha * p[[0, l]] + hyp.alpha * s;
        if hyp.kappa > 0.0 && l < k {
            w[l] += (hyp.alpha + hyp.kappa).ln() - hyp.kappa.ln();
        }
    }
    w
}

fn check_table(p: ArrayView2<f64>, k: usize, name: &str) -> Result<()> {
    if p.dim() != (k + 1, k + 1) {
        return Err(Error::shape(name, format!("({}, {})", k + 1, k + 1), format!("{:?}", p.dim())));
    }
    if p.iter().any(|v| !v.is_finite()) {
        return Err(Error::NonFinite { what: format!("`{name}`") });
    }
    Ok(())
}

/// Value and gradient of the top-level objective `f(û, ω̂)` (module docs) for a fixed table
/// `P = E_q[ln π]` (`(K+1) × (K+1)`). Returns `(f, ∂f/∂û, ∂f/∂ω̂)`.
///
/// # Errors
/// Shape/finiteness errors, invalid hyperparameters or sticks.
pub fn top_objective(
    u: ArrayView1<f64>,
    omega: ArrayView1<f64>,
    p: ArrayView2<f64>,
    hyp: &HmmHyper,
) -> Result<(f64, Array1<f64>, Array1<f64>)> {
    hyp.check()?;
    let k = u.len();
    check_sticks(u, omega, k)?;
    check_table(p, k, "e_log_pi")?;
    let w = linear_weights(p, hyp);
    Ok(objective_raw(u.as_slice().unwrap_or(&u.to_vec()), omega.as_slice().unwrap_or(&omega.to_vec()), &w, hyp))
}

fn objective_raw(u: &[f64], omega: &[f64], w: &Array1<f64>, hyp: &HmmHyper) -> (f64, Array1<f64>, Array1<f64>) {
    let k = u.len();
    let (a1, a0) = top_coefs(k, hyp);
    let beta = stick_pi(ArrayView1::from(u));
    let mut f = 0.0;
    let mut gu = Array1::zeros(k);
    let mut go = Array1::zeros(k);
    for i in 0..k {
        let (ui, oi) = (u[i], omega[i]);
        let (a, b) = (ui * oi, (1.0 - ui) * oi);
        let (ca, cb) = (a1[i] - a, a0[i] - b);
        let (pa, pb, po) = (digamma(a), digamma(b), digamma(oi));
        f += -c_beta(a, b) + ca * (pa - po) + cb * (pb - po);
        let (ta, tb, to) = (trigamma(a), trigamma(b), trigamma(oi));
        gu[i] = oi * (ca * ta - cb * tb);
        go[i] = ca * (ui * ta - to) + cb * ((1.0 - ui) * tb - to);
    }
    // linear part Σ_ℓ β_ℓ W_ℓ and its stick derivative (tail sums by one reverse pass)
    let mut tail = 0.0; // Σ_{ℓ>i} β_ℓ W_ℓ, including the remainder
    let bw: Vec<f64> = beta.iter().zip(w.iter()).map(|(b, w)| b * w).collect();
    f += bw.iter().sum::<f64>();
    tail += bw[k];
    for i in (0..k).rev() {
        gu[i] += bw[i] / u[i] - tail / (1.0 - u[i]);
        tail += bw[i];
    }
    (f, gu, go)
}

/// Options of [`optimize_sticks`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StickOptions {
    /// `false`: optimise `(û, ω̂)` jointly (default); `true`: set `ω̂ = a¹ + a⁰` (thesis Eq. 6.44,
    /// with the corrected sticky coefficients) and optimise `û` only
    pub heuristic_omega: bool,
    /// maximum L-BFGS iterations
    pub max_iter: usize,
}

impl Default for StickOptions {
    fn default() -> Self {
        StickOptions { heuristic_omega: false, max_iter: 500 }
    }
}

/// Maximise the top-level objective over `(û, ω̂)` from the start `(u0, omega0)`, for a fixed
/// table `P`. Returns a point whose `f` is no lower than the start's (the start itself if the
/// optimiser fails). `û` is kept in `[U_EPS, 1 − U_EPS]`.
///
/// # Errors
/// Shape/finiteness errors, invalid hyperparameters or sticks.
pub fn optimize_sticks(
    u0: ArrayView1<f64>,
    omega0: ArrayView1<f64>,
    p: ArrayView2<f64>,
    hyp: &HmmHyper,
    opts: StickOptions,
) -> Result<(Array1<f64>, Array1<f64>)> {
    hyp.check()?;
    let k = u0.len();
    check_sticks(u0, omega0, k)?;
    check_table(p, k, "e_log_pi")?;
    if k == 0 {
        return Ok((u0.to_owned(), omega0.to_owned()));
    }
    let w = linear_weights(p, hyp);
    Ok(maximize_sticks(u0, omega0, hyp, opts, |u, om| objective_raw(u, om, &w, hyp)))
}

/// Maximise the allocation objective over `(û, ω̂)` with `θ̂` at its optimum for each `û`: the
/// *profile* `F(û, ω̂) = L(θ̂(M, û), û, ω̂)` of the complete global step (the objective of
/// [`hdp_elbo_alloc`] without the entropies, which do not depend on the globals). Its gradient
/// is the top-level objective's at `P = E[ln π](θ̂(û))` (`θ̂` maximises `L` for fixed `û`, so
/// its own change drops out), and one L-BFGS run reaches the joint optimum that alternating
/// [`hdp_theta`] and [`optimize_sticks`] approaches only linearly.
///
/// # Errors
/// Shape/finiteness errors, invalid hyperparameters or sticks.
pub fn optimize_sticks_profile(
    start_count: ArrayView1<f64>,
    trans_count: ArrayView2<f64>,
    u0: ArrayView1<f64>,
    omega0: ArrayView1<f64>,
    hyp: &HmmHyper,
    opts: StickOptions,
) -> Result<(Array1<f64>, Array1<f64>)> {
    hyp.check()?;
    let k = check_counts(start_count, trans_count)?;
    check_sticks(u0, omega0, k)?;
    if k == 0 {
        return Ok((u0.to_owned(), omega0.to_owned()));
    }
    let profile = |u: &[f64], om: &[f64]| -> (f64, Array1<f64>, Array1<f64>) {
        let failed = || (f64::NEG_INFINITY, Array1::zeros(k), Array1::zeros(k));
        let (uv, ov) = (ArrayView1::from(u), ArrayView1::from(om));
        let Ok(theta) = hdp_theta(start_count, trans_count, uv, hyp) else { return failed() };
        let Ok(p) = e_log_pi_table(theta.view()) else { return failed() };
        // the allocation objective without the chain entropies (which do not depend on the
        // sticks), from the table just computed
        let Ok((trans, top)) = alloc_terms(start_count, trans_count, theta.view(), p.view(), uv, ov, hyp) else {
            return failed();
        };
        let (_, gu, go) = objective_raw(u, om, &linear_weights(p.view(), hyp), hyp);
        (trans + top, gu, go)
    };
    Ok(maximize_sticks(u0, omega0, hyp, opts, profile))
}

/// L-BFGS over `x = [logit û, ln ω̂]` (only `logit û` with the heuristic `ω̂`) of an objective
/// `obj(û, ω̂) = (f, ∂f/∂û, ∂f/∂ω̂)` to maximise; the start if the optimum found is no better.
fn maximize_sticks<F>(
    u0: ArrayView1<f64>,
    omega0: ArrayView1<f64>,
    hyp: &HmmHyper,
    opts: StickOptions,
    obj: F,
) -> (Array1<f64>, Array1<f64>)
where
    F: Fn(&[f64], &[f64]) -> (f64, Array1<f64>, Array1<f64>),
{
    let k = u0.len();
    let (a1, a0) = top_coefs(k, hyp);
    let fixed_omega: Option<Vec<f64>> =
        if opts.heuristic_omega { Some(a1.iter().zip(a0.iter()).map(|(x, y)| x + y).collect()) } else { None };
    let n_var = if opts.heuristic_omega { k } else { 2 * k };
    let lo = (U_EPS / (1.0 - U_EPS)).ln();
    // unconstrained coordinates x = [logit û, ln ω̂]; minimise g = −f
    let decode = |x: &[f64]| -> (Vec<f64>, Vec<f64>) {
        let u: Vec<f64> = x[..k].iter().map(|&c| 1.0 / (1.0 + (-c.clamp(lo, -lo)).exp())).collect();
        let om = match &fixed_omega {
            Some(o) => o.clone(),
            None => x[k..].iter().map(|&e| e.exp()).collect(),
        };
        (u, om)
    };
    let eval = |x: &[f64]| -> (f64, Vec<f64>) {
        let (u, om) = decode(x);
        let (f, gu, go) = obj(&u, &om);
        let mut g = vec![0.0; n_var];
        for i in 0..k {
            g[i] = -gu[i] * u[i] * (1.0 - u[i]);
            if fixed_omega.is_none() {
                g[k + i] = -go[i] * om[i];
            }
        }
        let val = if f.is_finite() && g.iter().all(|v| v.is_finite()) { -f } else { f64::INFINITY };
        (val, g)
    };
    let u_start: Vec<f64> = u0.iter().map(|&v| v.clamp(U_EPS, 1.0 - U_EPS)).collect();
    let mut x0: Vec<f64> = u_start.iter().map(|&v| (v / (1.0 - v)).ln()).collect();
    if fixed_omega.is_none() {
        x0.extend(omega0.iter().map(|&v| v.ln()));
    }
    let f_start = eval(&x0).0;
    let x = lbfgs(&eval, x0.clone(), opts.max_iter);
    let (mut u, om) = decode(&x);
    u.iter_mut().for_each(|v| *v = v.clamp(U_EPS, 1.0 - U_EPS));
    let f_end = {
        let (f, _, _) = obj(&u, &om);
        if f.is_finite() {
            -f
        } else {
            f64::INFINITY
        }
    };
    if f_end <= f_start {
        (Array1::from(u), Array1::from(om))
    } else if fixed_omega.is_some() {
        // the heuristic ω̂ is prescribed; keep the start û
        let (u, o) = decode(&x0);
        (Array1::from(u), Array1::from(o))
    } else {
        (u0.to_owned(), omega0.to_owned())
    }
}

/// Limited-memory BFGS with a backtracking (Armijo) line search; `eval` returns `(g, ∇g)` with
/// `g = +inf` outside the domain. Returns the best point found.
fn lbfgs<F: Fn(&[f64]) -> (f64, Vec<f64>)>(eval: &F, mut x: Vec<f64>, max_iter: usize) -> Vec<f64> {
    const MEM: usize = 10;
    let n = x.len();
    let (mut fx, mut gx) = eval(&x);
    if !fx.is_finite() {
        return x;
    }
    let mut hist_s: Vec<Vec<f64>> = Vec::new();
    let mut hist_y: Vec<Vec<f64>> = Vec::new();
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    for _ in 0..max_iter {
        let gnorm = gx.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        if gnorm <= 1e-10 * fx.abs().max(1.0) {
            break;
        }
        // two-loop recursion
        let mut q = gx.clone();
        let mut alphas = vec![0.0; hist_s.len()];
        for i in (0..hist_s.len()).rev() {
            let rho = 1.0 / dot(&hist_y[i], &hist_s[i]);
            alphas[i] = rho * dot(&hist_s[i], &q);
            q.iter_mut().zip(&hist_y[i]).for_each(|(a, &b)| *a -= alphas[i] * b);
        }
        if let (Some(s), Some(y)) = (hist_s.last(), hist_y.last()) {
            let gam = dot(s, y) / dot(y, y);
            q.iter_mut().for_each(|v| *v *= gam);
        } else {
            let scale = 1.0 / gnorm.max(1.0);
            q.iter_mut().for_each(|v| *v *= scale);
        }
        for i in 0..hist_s.len() {
            let rho = 1.0 / dot(&hist_y[i], &hist_s[i]);
            let beta = rho * dot(&hist_y[i], &q);
            q.iter_mut().zip(&hist_s[i]).for_each(|(a, &b)| *a += (alphas[i] - beta) * b);
        }
        let mut d: Vec<f64> = q.iter().map(|v| -v).collect();
        let mut slope = dot(&gx, &d);
        if !(slope < 0.0) {
            // not a descent direction: restart from steepest descent
            hist_s.clear();
            hist_y.clear();
            let scale = 1.0 / gnorm.max(1.0);
            d = gx.iter().map(|v| -v * scale).collect();
            slope = dot(&gx, &d);
        }
        let mut step = 1.0;
        let mut accepted = None;
        for _ in 0..60 {
            let xn: Vec<f64> = x.iter().zip(&d).map(|(a, b)| a + step * b).collect();
            let (fn_, gn) = eval(&xn);
            if fn_.is_finite() && fn_ <= fx + 1e-4 * step * slope {
                accepted = Some((xn, fn_, gn));
                break;
            }
            step *= 0.5;
        }
        let Some((xn, fn_, gn)) = accepted else { break };
        let s: Vec<f64> = xn.iter().zip(&x).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = gn.iter().zip(&gx).map(|(a, b)| a - b).collect();
        let improvement = fx - fn_;
        x = xn;
        gx = gn;
        let f_old = fx;
        fx = fn_;
        if dot(&s, &y) > 1e-12 * dot(&y, &y).sqrt() * dot(&s, &s).sqrt() {
            hist_s.push(s);
            hist_y.push(y);
            if hist_s.len() > MEM {
                hist_s.remove(0);
                hist_y.remove(0);
            }
        }
        if improvement <= 1e-15 * f_old.abs().max(1.0) {
            break;
        }
        let _ = n;
    }
    x
}

/// Result of [`hdp_global_step`].
#[derive(Debug, Clone)]
pub struct HdpGlobal {
    /// `θ̂` (`(K+1) × (K+1)`)
    pub theta: Array2<f64>,
    /// stick means `û` (`K`)
    pub u: Array1<f64>,
    /// stick concentrations `ω̂` (`K`)
    pub omega: Array1<f64>,
    /// `P = E_q[ln π]` for `θ̂` (`(K+1) × (K+1)`); the next local step uses `P[0, :K]` and
    /// `P[1:, :K]`
    pub e_log_pi: Array2<f64>,
}

/// Complete allocation global step: `θ̂ ← θ̂(M, û)`, then `n_iters` times
/// `{P ← E[ln π](θ̂); (û, ω̂) ← argmax f; θ̂ ← θ̂(M, û)}` (thesis "complete global step"; each
/// sub-step is a coordinate-ascent step, so the objective never decreases). With `profile`,
/// then [`optimize_sticks_profile`] and `θ̂ ← θ̂(M, û)`: the joint optimum, which the
/// alternation approaches only linearly (a dozen rounds from a cold start can leave the sticks
/// nats of objective short of it at K ≈ 20 with sticky chains).
///
/// # Errors
/// Shape/finiteness errors, invalid hyperparameters or sticks.
#[allow(clippy::too_many_arguments)]
pub fn hdp_global_step(
    start_count: ArrayView1<f64>,
    trans_count: ArrayView2<f64>,
    u0: ArrayView1<f64>,
    omega0: ArrayView1<f64>,
    hyp: &HmmHyper,
    n_iters: usize,
    profile: bool,
    opts: StickOptions,
) -> Result<HdpGlobal> {
    let k = check_counts(start_count, trans_count)?;
    check_sticks(u0, omega0, k)?;
    let mut u = u0.to_owned();
    let mut omega = omega0.to_owned();
    let mut theta = hdp_theta(start_count, trans_count, u.view(), hyp)?;
    for _ in 0..n_iters {
        let p = e_log_pi_table(theta.view())?;
        let (nu, no) = optimize_sticks(u.view(), omega.view(), p.view(), hyp, opts)?;
        u = nu;
        omega = no;
        theta = hdp_theta(start_count, trans_count, u.view(), hyp)?;
    }
    if profile {
        let (nu, no) = optimize_sticks_profile(start_count, trans_count, u.view(), omega.view(), hyp, opts)?;
        u = nu;
        omega = no;
        theta = hdp_theta(start_count, trans_count, u.view(), hyp)?;
    }
    let e_log_pi = e_log_pi_table(theta.view())?;
    Ok(HdpGlobal { theta, u, omega, e_log_pi })
}

/// Allocation terms of the objective (all from summaries).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AllocElbo {
    /// `Σ H^start + Σ H` (the chain entropy)
    pub entropy: f64,
    /// the transition term (thesis Eq. 6.26)
    pub trans: f64,
    /// the top-level surrogate (zero for the finite HMM)
    pub top: f64,
    /// `entropy + trans + top`
    pub total: f64,
}

fn check_entropies(h_start: ArrayView1<f64>, h_trans: ArrayView2<f64>, k: usize) -> Result<f64> {
    if h_start.len() != k {
        return Err(Error::shape("h_start", format!("({k},)"), format!("({},)", h_start.len())));
    }
    if h_trans.dim() != (k, k) {
        return Err(Error::shape("h_trans", format!("({k}, {k})"), format!("{:?}", h_trans.dim())));
    }
    if h_start.iter().chain(h_trans.iter()).any(|v| !v.is_finite()) {
        return Err(Error::NonFinite { what: "`h_start`/`h_trans`".into() });
    }
    Ok(h_start.sum() + h_trans.sum())
}

/// Top-level surrogate `L_top(û, ω̂)` (module docs; sticky form when `κ > 0`).
///
/// # Errors
/// Invalid hyperparameters or sticks.
pub fn hdp_top_surrogate(u: ArrayView1<f64>, omega: ArrayView1<f64>, hyp: &HmmHyper) -> Result<f64> {
    hyp.check()?;
    let k = u.len();
    check_sticks(u, omega, k)?;
    let kf = k as f64;
    let (a1, a0) = top_coefs(k, hyp);
    let mut top = kf * hyp.start_alpha.ln() + kf * kf * hyp.alpha.ln();
    if hyp.kappa > 0.0 {
        let d = (hyp.alpha + hyp.kappa).ln() - hyp.kappa.ln();
        let beta = stick_pi(u);
        top += -kf * d + d * beta.slice(s![..k]).sum();
    }
    let cb0 = c_beta(1.0, hyp.gamma);
    for i in 0..k {
        let (a, b) = (u[i] * omega[i], (1.0 - u[i]) * omega[i]);
        let po = digamma(omega[i]);
        top += cb0 - c_beta(a, b) + (a1[i] - a) * (digamma(a) - po) + (a0[i] - b) * (digamma(b) - po);
    }
    Ok(top)
}

/// Allocation part of the objective of the HDP-HMM for arbitrary `(θ̂, û, ω̂)` (not only after a
/// global step): chain entropy + transition term + top-level surrogate.
///
/// # Errors
/// Shape/finiteness errors, invalid hyperparameters, sticks or `theta`.
pub fn hdp_elbo_alloc(
    start_count: ArrayView1<f64>,
    trans_count: ArrayView2<f64>,
    h_start: ArrayView1<f64>,
    h_trans: ArrayView2<f64>,
    theta: ArrayView2<f64>,
    u: ArrayView1<f64>,
    omega: ArrayView1<f64>,
    hyp: &HmmHyper,
) -> Result<AllocElbo> {
    hyp.check()?;
    let k = check_counts(start_count, trans_count)?;
    let entropy = check_entropies(h_start, h_trans, k)?;
    check_sticks(u, omega, k)?;
    if theta.dim() != (k + 1, k + 1) {
        return Err(Error::shape("theta", format!("({}, {})", k + 1, k + 1), format!("{:?}", theta.dim())));
    }
    let p = e_log_pi_table(theta)?;
    let (trans, top) = alloc_terms(start_count, trans_count, theta, p.view(), u, omega, hyp)?;
    Ok(AllocElbo { entropy, trans, top, total: entropy + trans + top })
}

/// The transition term and the top-level surrogate of [`hdp_elbo_alloc`] for a `θ̂` whose table
/// `P = E[ln π](θ̂)` the caller already has (checked inputs).
fn alloc_terms(
    start_count: ArrayView1<f64>,
    trans_count: ArrayView2<f64>,
    theta: ArrayView2<f64>,
    p: ArrayView2<f64>,
    u: ArrayView1<f64>,
    omega: ArrayView1<f64>,
    hyp: &HmmHyper,
) -> Result<(f64, f64)> {
    let k = start_count.len();
    let prior = hdp_theta(Array1::zeros(k).view(), Array2::zeros((k, k)).view(), u, hyp)?;
    let mut trans = 0.0;
    for j in 0..=k {
        let row = theta.row(j);
        trans -= c_dir(&row.to_vec());
        for l in 0..=k {
            let cnt = if l == k {
                0.0
            } else if j == 0 {
                start_count[l].max(0.0)
            } else {
                trans_count[[j - 1, l]].max(0.0)
            };
            trans += (cnt + prior[[j, l]] - theta[[j, l]]) * p[[j, l]];
        }
    }
    let top = hdp_top_surrogate(u, omega, hyp)?;
    Ok((trans, top))
}

/// Prior Dirichlet parameters of the finite HMM (`(K+1) × K`): row 0 `α_0/K`, rows `j ≥ 1`
/// `α/K + κ δ_j`.
pub fn finite_hmm_prior(k: usize, hyp: &HmmHyper) -> Array2<f64> {
    let kf = k.max(1) as f64;
    Array2::from_shape_fn(
        (k + 1, k),
        |(j, l)| {
            if j == 0 {
                hyp.start_alpha / kf
            } else {
                hyp.alpha / kf + if l == j - 1 { hyp.kappa } else { 0.0 }
            }
        },
    )
}

/// Optimal `θ̂ = prior + counts` of the finite HMM (`(K+1) × K`, row 0 = start row).
///
/// # Errors
/// Shape/finiteness errors or invalid hyperparameters.
pub fn finite_hmm_theta(start_count: ArrayView1<f64>, trans_count: ArrayView2<f64>, hyp: &HmmHyper) -> Result<Array2<f64>> {
    hyp.check()?;
    let k = check_counts(start_count, trans_count)?;
    let mut th = finite_hmm_prior(k, hyp);
    for l in 0..k {
        th[[0, l]] += start_count[l].max(0.0);
        for j in 0..k {
            th[[j + 1, l]] += trans_count[[j, l]].max(0.0);
        }
    }
    Ok(th)
}

/// Allocation part of the objective of the finite HMM for arbitrary `θ̂` (`(K+1) × K`):
/// entropy + `Σ_j [c_Dir(prior_j) − c_Dir(θ̂_j) + Σ_ℓ (prior_jℓ + M_jℓ − θ̂_jℓ) P_jℓ]`.
///
/// # Errors
/// Shape/finiteness errors, invalid hyperparameters or `theta`.
pub fn finite_hmm_elbo_alloc(
    start_count: ArrayView1<f64>,
    trans_count: ArrayView2<f64>,
    h_start: ArrayView1<f64>,
    h_trans: ArrayView2<f64>,
    theta: ArrayView2<f64>,
    hyp: &HmmHyper,
) -> Result<AllocElbo> {
    hyp.check()?;
    let k = check_counts(start_count, trans_count)?;
    let entropy = check_entropies(h_start, h_trans, k)?;
    if theta.dim() != (k + 1, k) {
        return Err(Error::shape("theta", format!("({}, {k})", k + 1), format!("{:?}", theta.dim())));
    }
    let p = e_log_pi_table(theta)?;
    let prior = finite_hmm_prior(k, hyp);
    let mut trans = 0.0;
    for j in 0..=k {
        trans += c_dir(&prior.row(j).to_vec()) - c_dir(&theta.row(j).to_vec());
        for l in 0..k {
            let cnt = if j == 0 { start_count[l].max(0.0) } else { trans_count[[j - 1, l]].max(0.0) };
            trans += (prior[[j, l]] + cnt - theta[[j, l]]) * p[[j, l]];
        }
    }
    Ok(AllocElbo { entropy, trans, top: 0.0, total: entropy + trans })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    fn hyp(kappa: f64) -> HmmHyper {
        HmmHyper { alpha: 0.7, start_alpha: 5.0, kappa, gamma: 3.0 }
    }

    fn counts() -> (Array1<f64>, Array2<f64>) {
        (array![1.5, 0.5, 1.0], array![[20.0, 1.0, 0.5], [2.0, 14.0, 0.0], [0.3, 0.7, 9.0]])
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let (m0, m) = counts();
        for kappa in [0.0, 0.5, 50.0] {
            let h = hyp(kappa);
            let u = array![0.3, 0.45, 0.6];
            let om = array![4.0, 11.0, 30.0];
            let th = hdp_theta(m0.view(), m.view(), u.view(), &h).unwrap();
            let p = e_log_pi_table(th.view()).unwrap();
            let (_, gu, go) = top_objective(u.view(), om.view(), p.view(), &h).unwrap();
            for i in 0..3 {
                let eps = 1e-6;
                let f = |du: f64, dw: f64| {
                    let mut u2 = u.clone();
                    let mut o2 = om.clone();
                    u2[i] += du;
                    o2[i] += dw;
                    top_objective(u2.view(), o2.view(), p.view(), &h).unwrap().0
                };
                let nu = (f(eps, 0.0) - f(-eps, 0.0)) / (2.0 * eps);
                let no = (f(0.0, eps * 10.0) - f(0.0, -eps * 10.0)) / (2.0 * eps * 10.0);
                assert!((nu - gu[i]).abs() <= 1e-6 * gu[i].abs().max(1.0), "du {kappa} {i}: {nu} vs {}", gu[i]);
                assert!((no - go[i]).abs() <= 1e-6 * go[i].abs().max(1.0), "domega {kappa} {i}: {no} vs {}", go[i]);
            }
        }
    }

    #[test]
    fn global_step_never_decreases_the_objective() {
        let (m0, m) = counts();
        let z = Array1::<f64>::zeros(3);
        let zz = Array2::<f64>::zeros((3, 3));
        for kappa in [0.0, 50.0] {
            for heuristic in [false, true] {
                let h = hyp(kappa);
                let u = init_u(3);
                let om = Array1::from_elem(3, 1.0 + h.gamma);
                let th = hdp_theta(m0.view(), m.view(), u.view(), &h).unwrap();
                let before = hdp_elbo_alloc(m0.view(), m.view(), z.view(), zz.view(), th.view(), u.view(), om.view(), &h).unwrap().total;
                let g = hdp_global_step(
                    m0.view(),
                    m.view(),
                    u.view(),
                    om.view(),
                    &h,
                    5,
                    false,
                    StickOptions { heuristic_omega: heuristic, max_iter: 500 },
                )
                .unwrap();
                let after =
                    hdp_elbo_alloc(m0.view(), m.view(), z.view(), zz.view(), g.theta.view(), g.u.view(), g.omega.view(), &h).unwrap().total;
                assert!(after >= before - 1e-9 * before.abs(), "{kappa} {heuristic}: {after} < {before}");
                if heuristic {
                    let (a1, a0) = top_coefs(3, &h);
                    assert!(g.omega.iter().zip(a1.iter().zip(a0.iter())).all(|(o, (x, y))| (o - (x + y)).abs() < 1e-12));
                }
            }
        }
    }

    #[test]
    fn theta_update_leaves_no_slack() {
        let (m0, m) = counts();
        let h = hyp(2.0);
        let u = array![0.3, 0.45, 0.6];
        let th = hdp_theta(m0.view(), m.view(), u.view(), &h).unwrap();
        // sticky mass on the state rows only, not on the start row
        let beta = stick_pi(u.view());
        assert!((th[[0, 0]] - (m0[0] + h.start_alpha * beta[0])).abs() < 1e-12);
        assert!((th[[2, 1]] - (m[[1, 1]] + h.alpha * beta[1] + h.kappa)).abs() < 1e-12);
        let z = Array1::<f64>::zeros(3);
        let zz = Array2::<f64>::zeros((3, 3));
        let om = array![4.0, 11.0, 30.0];
        let e = hdp_elbo_alloc(m0.view(), m.view(), z.view(), zz.view(), th.view(), u.view(), om.view(), &h).unwrap();
        let want: f64 = -(0..4).map(|j| c_dir(&th.row(j).to_vec())).sum::<f64>();
        assert!((e.trans - want).abs() < 1e-10 * want.abs());
    }

    #[test]
    fn init_u_gives_equal_weights() {
        let u = init_u(4);
        let b = stick_pi(u.view());
        for i in 0..4 {
            assert!((b[i] - (1.0 - 1.0 / 16.0) / 4.0).abs() < 1e-12);
        }
    }
}
