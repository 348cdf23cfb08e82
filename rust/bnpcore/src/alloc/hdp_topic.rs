//! Allocation math of the HDP topic model and of LDA (Hughes thesis §5.2–§5.4, eq. 5.21–5.39,
//! 5.47–5.48; Hughes & Sudderth 2016, App. C for LDA).
//!
//! Top-level sticks `q(u_k) = Beta(ρ_k ω_k, (1 − ρ_k) ω_k)`, `k = 1..K`, give the expected global
//! topic probabilities `β_k = ρ_k Π_{ℓ<k}(1 − ρ_ℓ)` and `β_{>K} = Π_ℓ (1 − ρ_ℓ)`; documents use
//! the prior pseudocounts `a_k = α β_k`, `a_rem = α β_{>K}` ([`super::super::local::doc_topic`]).
//!
//! **Surrogate top term** (thesis eq. 5.23–5.25): since `c_Dir(α b) ≥ K ln α + Σ_k ln b_k` for
//! every probability vector `b` with `K + 1` entries and every `α > 0` (`g(x) = ln Γ(1 + x)` is
//! convex with `g(0) = 0`, hence superadditive),
//!
//! ```text
//! L_top^sur = D K ln α + Σ_k [ c_B(1, γ) − c_B(η_k1, η_k0) + (on_k − η_k1) E ln u_k
//!                              + (off_k − η_k0) E ln(1 − u_k) ]
//! ```
//!
//! with `on_k = D + 1`, `off_k = D (K + 1 − k) + γ` (1-based `k`).
//!
//! **Document term from summaries** (thesis eq. 5.47–5.48, signs as in eq. 5.27):
//! `L_doc = Q0 + Σ_k Q_k + Q_rem + α Σ_k β_k P_k + α β_{>K} P_rem`.
//!
//! **ρ step** (thesis eq. 5.34–5.39): with `ω` fixed, maximise
//!
//! ```text
//! f(ρ) = Σ_k [−c_B(η_k1, η_k0) + (on_k − η_k1)(ψ(η_k1) − ψ(ω_k)) + (off_k − η_k0)(ψ(η_k0) − ψ(ω_k))]
//!        + α Σ_k β_k(ρ) P_k + α Σ_k β_{>k}(ρ) U_k
//! ```
//!
//! (`U_k = 0` for `k < K`, `U_K = P_rem`), whose gradient is
//! `∂f/∂ρ_k = ω_k [(on_k − η_k1) ψ'(η_k1) − (off_k − η_k0) ψ'(η_k0)]
//! + α [β_k P_k / ρ_k − (Σ_{j>k} β_j P_j + Σ_{j≥k} β_{>j} U_j) / (1 − ρ_k)]` (the digamma parts
//! cancel). The optimiser works on `y = logit ρ` with L-BFGS (memory 10, backtracking Armijo line
//! search), retries with looser tolerances on failure and returns the start point unless the
//! result is strictly better, so the step never decreases `f`. The default `ω` is the heuristic
//! `ω_k = D (K + 1 − k) + D + 1 + γ` (thesis eq. 5.39).

use ndarray::{Array1, ArrayView1};

use crate::error::{Error, Result};
use crate::special::{c_beta, digamma, gammaln, trigamma};

/// Smallest and largest `ρ` produced by the optimiser.
pub const RHO_MIN: f64 = 1e-8;

fn finite_all(x: ArrayView1<f64>, name: &str) -> Result<()> {
    if x.iter().any(|v| !v.is_finite()) {
        return Err(Error::NonFinite { what: format!("`{name}`") });
    }
    Ok(())
}

fn check_rho(rho: ArrayView1<f64>) -> Result<()> {
    if rho.iter().any(|&r| !(r > 0.0 && r < 1.0)) {
        return Err(Error::param("rho", "every stick mean must lie in (0, 1)"));
    }
    Ok(())
}

fn check_pos(x: f64, name: &str) -> Result<()> {
    if !(x > 0.0) || !x.is_finite() {
        return Err(Error::param(name, format!("must be finite and > 0, got {x}")));
    }
    Ok(())
}

/// `(β, β_{>K})` with `β_k = ρ_k Π_{ℓ<k}(1 − ρ_ℓ)`, `β_{>K} = Π_ℓ (1 − ρ_ℓ)`.
///
/// # Errors
/// A `ρ_k` outside `(0, 1)`.
pub fn beta_from_rho(rho: ArrayView1<f64>) -> Result<(Array1<f64>, f64)> {
    check_rho(rho)?;
    let mut rest = 1.0;
    let beta = rho
        .iter()
        .map(|&r| {
            let b = r * rest;
            rest *= 1.0 - r;
            b
        })
        .collect();
    Ok((beta, rest))
}

/// Inverse of [`beta_from_rho`]: `ρ_k = β_k / (1 − Σ_{j<k} β_j)`, clamped to
/// `[RHO_MIN, 1 − RHO_MIN]`.
///
/// # Errors
/// A negative or non-finite `β_k`, or `Σ β ≥ 1`.
pub fn rho_from_beta(beta: ArrayView1<f64>) -> Result<Array1<f64>> {
    if beta.iter().any(|&b| !(b >= 0.0) || !b.is_finite()) || !(beta.sum() < 1.0) {
        return Err(Error::param("beta", "needs entries >= 0 summing to < 1 (the rest is the remaining mass)"));
    }
    let mut rest = 1.0;
    Ok(beta
        .iter()
        .map(|&b| {
            let r = (b / rest).clamp(RHO_MIN, 1.0 - RHO_MIN);
            rest -= b;
            r
        })
        .collect())
}

/// Heuristic stick totals `ω_k = D (K + 1 − k) + D + 1 + γ`, `k = 1..K` (thesis eq. 5.39).
///
/// # Errors
/// `n_docs < 0` or `gamma ≤ 0`.
pub fn omega_heuristic(n_docs: f64, k: usize, gamma: f64) -> Result<Array1<f64>> {
    check_docs(n_docs)?;
    check_pos(gamma, "gamma")?;
    Ok((1..=k).map(|j| n_docs * (k + 1 - j) as f64 + n_docs + 1.0 + gamma).collect())
}

/// First-step initialisation `ρ_k = (D + 1) / (D + 1 + D (K + 1 − k) + γ)`.
///
/// # Errors
/// `n_docs < 0` or `gamma ≤ 0`.
pub fn rho_init(n_docs: f64, k: usize, gamma: f64) -> Result<Array1<f64>> {
    check_docs(n_docs)?;
    check_pos(gamma, "gamma")?;
    Ok((1..=k).map(|j| (n_docs + 1.0) / (n_docs + 1.0 + n_docs * (k + 1 - j) as f64 + gamma)).collect())
}

fn check_docs(n_docs: f64) -> Result<()> {
    if !(n_docs >= 0.0) || !n_docs.is_finite() {
        return Err(Error::param("n_docs", format!("must be finite and >= 0, got {n_docs}")));
    }
    Ok(())
}

/// The ρ-dependent part of the HDP objective, `f(ρ)` of the module docs, for fixed `ω`.
#[derive(Debug, Clone)]
pub struct RhoProblem {
    /// Document concentration α.
    pub alpha: f64,
    /// Top-level concentration γ.
    pub gamma: f64,
    /// Stick totals ω (K).
    pub omega: Array1<f64>,
    /// `on_k` (K): `D + 1` under a single truncation.
    pub on: Array1<f64>,
    /// `off_k` (K): `D (K + 1 − k) + γ` under a single truncation.
    pub off: Array1<f64>,
    /// `P_k = Σ_d E[ln π_dk]` (K).
    pub p: Array1<f64>,
    /// `U_k` (K): the rem statistics by truncation level (`U_K = P_rem`, others 0).
    pub u: Array1<f64>,
}

/// Result of [`RhoProblem::optimize`].
#[derive(Debug, Clone)]
pub struct RhoResult {
    /// The maximiser found (or the start if nothing better was found).
    pub rho: Array1<f64>,
    /// `f(rho)`.
    pub f: f64,
    /// L-BFGS iterations of the accepted attempt.
    pub n_iter: usize,
    /// Whether an attempt met its tolerance.
    pub converged: bool,
}

impl RhoProblem {
    /// Single-truncation problem from the whole-dataset statistics `D`, `P` (K) and `P_rem`;
    /// `omega = None` uses [`omega_heuristic`].
    ///
    /// # Errors
    /// Non-positive `alpha`/`gamma`, negative `n_docs`, non-finite statistics, bad `omega` shape.
    pub fn single(n_docs: f64, alpha: f64, gamma: f64, p: ArrayView1<f64>, p_rem: f64, omega: Option<ArrayView1<f64>>) -> Result<Self> {
        check_docs(n_docs)?;
        check_pos(alpha, "alpha")?;
        check_pos(gamma, "gamma")?;
        finite_all(p, "P")?;
        if !p_rem.is_finite() {
            return Err(Error::NonFinite { what: "`P_rem`".into() });
        }
        let k = p.len();
        let omega = match omega {
            Some(o) => {
                if o.len() != k {
                    return Err(Error::shape("omega", format!("({k},)"), format!("({},)", o.len())));
                }
                if o.iter().any(|&x| !(x > 0.0) || !x.is_finite()) {
                    return Err(Error::param("omega", "stick totals must be finite and > 0"));
                }
                o.to_owned()
            }
            None => omega_heuristic(n_docs, k, gamma)?,
        };
        let on = Array1::from_elem(k, n_docs + 1.0);
        let off = (1..=k).map(|j| n_docs * (k + 1 - j) as f64 + gamma).collect();
        let mut u = Array1::zeros(k);
        if k > 0 {
            u[k - 1] = p_rem;
        }
        Ok(RhoProblem { alpha, gamma, omega, on, off, p: p.to_owned(), u })
    }

    fn k(&self) -> usize {
        self.p.len()
    }

    /// `f(ρ)`.
    ///
    /// # Errors
    /// Wrong length or `ρ_k ∉ (0, 1)`.
    pub fn objective(&self, rho: ArrayView1<f64>) -> Result<f64> {
        self.check(rho)?;
        Ok(self.value(rho.as_slice().map_or_else(|| rho.to_vec(), <[f64]>::to_vec).as_slice()))
    }

    /// `∂f/∂ρ` (K).
    ///
    /// # Errors
    /// Wrong length or `ρ_k ∉ (0, 1)`.
    pub fn gradient(&self, rho: ArrayView1<f64>) -> Result<Array1<f64>> {
        self.check(rho)?;
        let r = rho.to_vec();
        let (_, g) = self.value_grad(&r, false);
        Ok(Array1::from(g))
    }

    fn check(&self, rho: ArrayView1<f64>) -> Result<()> {
        if rho.len() != self.k() {
            return Err(Error::shape("rho", format!("({},)", self.k()), format!("({},)", rho.len())));
        }
        check_rho(rho)
    }

    fn value(&self, rho: &[f64]) -> f64 {
        self.value_grad(rho, false).0
    }

    /// `f` and its gradient with respect to `ρ` (`logit = false`) or `y = logit ρ`.
    fn value_grad(&self, rho: &[f64], logit: bool) -> (f64, Vec<f64>) {
        let k = self.k();
        let mut f = 0.0;
        let mut g = vec![0.0; k];
        let mut beta = vec![0.0; k];
        let mut beta_gt = vec![0.0; k];
        let mut rest = 1.0;
        for j in 0..k {
            beta[j] = rho[j] * rest;
            rest *= 1.0 - rho[j];
            beta_gt[j] = rest;
        }
        for j in 0..k {
            let (om, r) = (self.omega[j], rho[j]);
            let (e1, e0) = (r * om, (1.0 - r) * om);
            let (c_on, c_off) = (self.on[j] - e1, self.off[j] - e0);
            let psi_om = digamma(om);
            f += -c_beta(e1, e0) + c_on * (digamma(e1) - psi_om) + c_off * (digamma(e0) - psi_om);
            f += self.alpha * (beta[j] * self.p[j] + beta_gt[j] * self.u[j]);
            g[j] = om * (c_on * trigamma(e1) - c_off * trigamma(e0));
        }
        // suffix sums: T_k = Σ_{j>k} β_j P_j + Σ_{j≥k} β_{>j} U_j
        let mut tail = 0.0;
        for j in (0..k).rev() {
            let t = tail + beta_gt[j] * self.u[j];
            let r = rho[j];
            if logit {
                g[j] = r * (1.0 - r) * g[j] + self.alpha * ((1.0 - r) * beta[j] * self.p[j] - r * t);
            } else {
                g[j] += self.alpha * (beta[j] * self.p[j] / r - t / (1.0 - r));
            }
            tail = t + beta[j] * self.p[j];
        }
        (f, g)
    }

    /// Maximise `f` from `rho_init` (L-BFGS in `logit ρ`, module docs). Never returns a point
    /// with a smaller `f` than the start.
    ///
    /// # Errors
    /// Wrong length or `ρ_k ∉ (0, 1)` in `rho_init`, or a non-finite `f` at the start.
    pub fn optimize(&self, rho_init: ArrayView1<f64>, max_iter: usize) -> Result<RhoResult> {
        self.check(rho_init)?;
        let r0: Vec<f64> = rho_init.iter().map(|&r| r.clamp(RHO_MIN, 1.0 - RHO_MIN)).collect();
        let f0 = self.value(&r0);
        if !f0.is_finite() {
            return Err(Error::Numerical { what: "the rho objective is not finite at the start point".into() });
        }
        let y0: Vec<f64> = r0.iter().map(|&r| (r / (1.0 - r)).ln()).collect();
        let eval = |y: &[f64]| {
            let rho: Vec<f64> = y.iter().map(|&t| sigmoid(t)).collect();
            let (f, g) = self.value_grad(&rho, true);
            (-f, g.into_iter().map(|x| -x).collect::<Vec<f64>>())
        };
        let mut best = RhoResult { rho: Array1::from(r0), f: f0, n_iter: 0, converged: false };
        for &scale in &[1.0, 1e2, 1e4, 1e6, 1e8] {
            let out = lbfgs(&eval, &y0, max_iter, 1e-13 * scale, 1e-10 * scale);
            let rho: Vec<f64> = out.x.iter().map(|&t| sigmoid(t)).collect();
            let f = self.value(&rho);
            if f.is_finite() && out.ok {
                if f > best.f {
                    best = RhoResult { rho: Array1::from(rho), f, n_iter: out.iters, converged: true };
                } else {
                    best.converged = true;
                }
                break;
            }
        }
        Ok(best)
    }
}

fn sigmoid(t: f64) -> f64 {
    let r = if t >= 0.0 { 1.0 / (1.0 + (-t).exp()) } else { t.exp() / (1.0 + t.exp()) };
    r.clamp(RHO_MIN, 1.0 - RHO_MIN)
}

struct LbfgsOut {
    x: Vec<f64>,
    iters: usize,
    ok: bool,
}

fn vdot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Minimise `fg` (value, gradient) by L-BFGS with memory 10 and a backtracking Armijo line
/// search. Converged when the relative decrease falls below `ftol` or `‖g‖_∞ ≤ gtol (1 + |f|)`.
fn lbfgs<F: Fn(&[f64]) -> (f64, Vec<f64>)>(fg: &F, x0: &[f64], max_iter: usize, ftol: f64, gtol: f64) -> LbfgsOut {
    const MEM: usize = 10;
    let n = x0.len();
    let mut x = x0.to_vec();
    let (mut f, mut g) = fg(&x);
    if !f.is_finite() || g.iter().any(|v| !v.is_finite()) {
        return LbfgsOut { x, iters: 0, ok: false };
    }
    let mut ss: Vec<Vec<f64>> = Vec::new();
    let mut ys: Vec<Vec<f64>> = Vec::new();
    for it in 0..max_iter {
        let gmax = g.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        if gmax <= gtol * (1.0 + f.abs()) || n == 0 {
            return LbfgsOut { x, iters: it, ok: true };
        }
        // two-loop recursion
        let mut d: Vec<f64> = g.iter().map(|v| -v).collect();
        let mut alphas = vec![0.0; ss.len()];
        for i in (0..ss.len()).rev() {
            let rho = 1.0 / vdot(&ys[i], &ss[i]);
            alphas[i] = rho * vdot(&ss[i], &d);
            for t in 0..n {
                d[t] -= alphas[i] * ys[i][t];
            }
        }
        if let (Some(s), Some(y)) = (ss.last(), ys.last()) {
            let h0 = vdot(s, y) / vdot(y, y);
            d.iter_mut().for_each(|v| *v *= h0);
        } else {
            let scale = 1.0 / gmax.max(1e-300);
            d.iter_mut().for_each(|v| *v *= scale.min(1.0));
        }
        for i in 0..ss.len() {
            let rho = 1.0 / vdot(&ys[i], &ss[i]);
            let b = rho * vdot(&ys[i], &d);
            for t in 0..n {
                d[t] += ss[i][t] * (alphas[i] - b);
            }
        }
        let mut slope = vdot(&g, &d);
        if !(slope < 0.0) {
            ss.clear();
            ys.clear();
            d = g.iter().map(|v| -v / gmax).collect();
            slope = vdot(&g, &d);
        }
        let mut step = 1.0;
        let mut accepted = None;
        for _ in 0..60 {
            let xn: Vec<f64> = x.iter().zip(&d).map(|(a, b)| a + step * b).collect();
            let (fnew, gnew) = fg(&xn);
            if fnew.is_finite() && gnew.iter().all(|v| v.is_finite()) && fnew <= f + 1e-4 * step * slope {
                accepted = Some((xn, fnew, gnew));
                break;
            }
            step *= 0.5;
        }
        let Some((xn, fnew, gnew)) = accepted else {
            // no decrease possible along d: converged to round-off if the gradient is small
            let ok = gmax <= 1e-6 * (1.0 + f.abs());
            return LbfgsOut { x, iters: it, ok };
        };
        let s: Vec<f64> = xn.iter().zip(&x).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = gnew.iter().zip(&g).map(|(a, b)| a - b).collect();
        if vdot(&s, &y) > 1e-12 * vdot(&y, &y).sqrt() * vdot(&s, &s).sqrt() {
            if ss.len() == MEM {
                ss.remove(0);
                ys.remove(0);
            }
            ss.push(s);
            ys.push(y);
        }
        let rel = (f - fnew).abs() / f.abs().max(fnew.abs()).max(1.0);
        x = xn;
        f = fnew;
        g = gnew;
        if rel <= ftol {
            return LbfgsOut { x, iters: it + 1, ok: true };
        }
    }
    LbfgsOut { x, iters: max_iter, ok: false }
}

/// Surrogate top term `L_top^sur` (module docs) for `D` documents under a single truncation.
///
/// # Errors
/// Shapes, `ρ ∉ (0, 1)`, non-positive `omega`, `alpha`, `gamma`, negative `n_docs`.
pub fn hdp_elbo_top(rho: ArrayView1<f64>, omega: ArrayView1<f64>, n_docs: f64, alpha: f64, gamma: f64) -> Result<f64> {
    check_rho(rho)?;
    check_docs(n_docs)?;
    check_pos(alpha, "alpha")?;
    check_pos(gamma, "gamma")?;
    let k = rho.len();
    if omega.len() != k {
        return Err(Error::shape("omega", format!("({k},)"), format!("({},)", omega.len())));
    }
    if omega.iter().any(|&x| !(x > 0.0) || !x.is_finite()) {
        return Err(Error::param("omega", "stick totals must be finite and > 0"));
    }
    let mut val = n_docs * k as f64 * alpha.ln();
    for j in 0..k {
        let (om, r) = (omega[j], rho[j]);
        let (e1, e0) = (r * om, (1.0 - r) * om);
        let psi_om = digamma(om);
        let off = n_docs * (k - j) as f64 + gamma;
        val += c_beta(1.0, gamma) - c_beta(e1, e0) + (n_docs + 1.0 - e1) * (digamma(e1) - psi_om) + (off - e0) * (digamma(e0) - psi_om);
    }
    Ok(val)
}

/// Document term `L_doc = Q0 + Σ_k Q_k + Q_rem + α Σ_k β_k P_k + α β_{>K} P_rem` from summaries.
///
/// # Errors
/// Length mismatch or non-finite inputs.
pub fn hdp_elbo_doc(
    q0: f64,
    q: ArrayView1<f64>,
    q_rem: f64,
    p: ArrayView1<f64>,
    p_rem: f64,
    alpha: f64,
    beta: ArrayView1<f64>,
    beta_rem: f64,
) -> Result<f64> {
    let k = q.len();
    if p.len() != k || beta.len() != k {
        return Err(Error::shape("P/beta", format!("({k},) like Q"), format!("({},) / ({},)", p.len(), beta.len())));
    }
    check_pos(alpha, "alpha")?;
    let v = q0 + q.sum() + q_rem + alpha * beta.iter().zip(p.iter()).map(|(b, x)| b * x).sum::<f64>() + alpha * beta_rem * p_rem;
    if !v.is_finite() {
        return Err(Error::NonFinite { what: "the document term of the ELBO".into() });
    }
    Ok(v)
}

/// LDA document term (Hughes & Sudderth 2016, eq. 47–49) from summaries of a step run with
/// `a_k = α / K` and no rem entry: `D c_Dir(α/K · 1_K) + Q0 + Σ_k Q_k + (α / K) Σ_k P_k`.
///
/// # Errors
/// `K = 0`, non-positive `alpha`, negative `n_docs`, non-finite result.
pub fn lda_elbo_doc(n_docs: f64, alpha: f64, q0: f64, q: ArrayView1<f64>, p: ArrayView1<f64>) -> Result<f64> {
    check_docs(n_docs)?;
    check_pos(alpha, "alpha")?;
    let k = q.len();
    if k == 0 || p.len() != k {
        return Err(Error::shape("P", format!("({k},) like Q, K >= 1"), format!("({},)", p.len())));
    }
    let a = alpha / k as f64;
    let c_prior = gammaln(alpha) - k as f64 * gammaln(a);
    let v = n_docs * c_prior + q0 + q.sum() + a * p.sum();
    if !v.is_finite() {
        return Err(Error::NonFinite { what: "the LDA document term".into() });
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    fn problem() -> RhoProblem {
        let p = array![-3.0, -5.5, -9.0, -20.0];
        RhoProblem::single(7.0, 0.7, 3.0, p.view(), -40.0, None).unwrap()
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let pb = problem();
        let rho = array![0.3, 0.45, 0.2, 0.6];
        let g = pb.gradient(rho.view()).unwrap();
        for j in 0..4 {
            let h = 1e-6;
            let mut a = rho.clone();
            let mut b = rho.clone();
            a[j] += h;
            b[j] -= h;
            let fd = (pb.objective(a.view()).unwrap() - pb.objective(b.view()).unwrap()) / (2.0 * h);
            assert!((fd - g[j]).abs() <= 1e-6 * (1.0 + g[j].abs()), "k={j}: fd {fd} vs {}", g[j]);
        }
    }

    #[test]
    fn optimizer_never_worse_and_stationary() {
        let pb = problem();
        let r0 = rho_init(7.0, 4, 3.0).unwrap();
        let f0 = pb.objective(r0.view()).unwrap();
        let out = pb.optimize(r0.view(), 500).unwrap();
        assert!(out.f >= f0);
        let g = pb.gradient(out.rho.view()).unwrap();
        for j in 0..4 {
            let gy = out.rho[j] * (1.0 - out.rho[j]) * g[j];
            assert!(gy.abs() < 1e-5, "gradient {gy}");
        }
    }

    #[test]
    fn prior_recovered_without_documents() {
        let p = Array1::zeros(3);
        let pb = RhoProblem::single(0.0, 0.5, 1.0, p.view(), 0.0, None).unwrap();
        assert!(pb.omega.iter().all(|&o| (o - 2.0).abs() < 1e-12));
        let out = pb.optimize(array![0.2, 0.7, 0.9].view(), 500).unwrap();
        for &r in &out.rho {
            assert!((r - 0.5).abs() < 1e-6, "rho {r}");
        }
    }

    #[test]
    fn beta_round_trip() {
        let rho = array![0.3, 0.5, 0.25];
        let (beta, rem) = beta_from_rho(rho.view()).unwrap();
        assert!((beta.sum() + rem - 1.0).abs() < 1e-15);
        let back = rho_from_beta(beta.view()).unwrap();
        for j in 0..3 {
            assert!((back[j] - rho[j]).abs() < 1e-14);
        }
    }

    #[test]
    fn surrogate_bound_holds() {
        // c_Dir(α b) ≥ K ln α + Σ ln b for a few (α, b)
        for &alpha in &[0.01, 0.5, 3.0, 150.0] {
            let b = [0.5, 0.2, 0.2, 0.1];
            let ab: Vec<f64> = b.iter().map(|x| alpha * x).collect();
            let lhs = crate::special::c_dir(&ab);
            let rhs = 3.0 * alpha.ln() + b.iter().map(|x: &f64| x.ln()).sum::<f64>();
            assert!(lhs >= rhs - 1e-12, "alpha {alpha}: {lhs} < {rhs}");
        }
    }
}
