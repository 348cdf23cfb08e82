//! Spec 01 P6 in Rust: with one cluster and all responsibilities 1, the ELBO at the optimal
//! posterior equals the exact log marginal likelihood of the conjugate model. The marginal
//! likelihood is computed here by hand for 1-D Gaussians, as the chain of Student-t posterior
//! predictive densities p(x_1) p(x_2 | x_1) ... (independent of the c-function code in the crate).

mod common;

use bnpcore::alloc::Alloc;
use bnpcore::local::LocalOptions;
use bnpcore::obs::{DiagGauss, Gauss, Obs};
use common::Rng;
use ndarray::{array, Array1, Array2};

/// ln Student-t(x | dof, loc, scale²) =
/// lnΓ((ν+1)/2) − lnΓ(ν/2) − ½ ln(ν π s²) − (ν+1)/2 ln(1 + (x − loc)² / (ν s²)).
fn ln_student_t(x: f64, dof: f64, loc: f64, scale2: f64) -> f64 {
    libm::lgamma(0.5 * (dof + 1.0))
        - libm::lgamma(0.5 * dof)
        - 0.5 * (dof * std::f64::consts::PI * scale2).ln()
        - 0.5 * (dof + 1.0) * (1.0 + (x - loc).powi(2) / (dof * scale2)).ln()
}

/// Normal-Gamma prior on (μ, λ): λ ~ Gamma(ν/2, rate β/2), μ | λ ~ N(m, 1/(κλ)).
/// Predictive of the next point: Student-t with ν dof, location m, scale² β(κ+1)/(κν).
/// Update after x: β += κ/(κ+1) (x − m)², m = (κ m + x)/(κ+1), κ += 1, ν += 1.
fn ln_marginal_normal_gamma(xs: &[f64], mut nu: f64, mut kappa: f64, mut m: f64, mut beta: f64) -> f64 {
    let mut total = 0.0;
    for &x in xs {
        total += ln_student_t(x, nu, m, beta * (kappa + 1.0) / (kappa * nu));
        beta += kappa / (kappa + 1.0) * (x - m).powi(2);
        m = (kappa * m + x) / (kappa + 1.0);
        kappa += 1.0;
        nu += 1.0;
    }
    total
}

/// Zero-mean: λ ~ Gamma(ν/2, rate B/2), x | λ ~ N(0, 1/λ). Predictive: Student-t with ν dof,
/// location 0, scale² B/ν. Update: B += x², ν += 1.
fn ln_marginal_zero_mean(xs: &[f64], mut nu: f64, mut b: f64) -> f64 {
    let mut total = 0.0;
    for &x in xs {
        total += ln_student_t(x, nu, 0.0, b / nu);
        b += x * x;
        nu += 1.0;
    }
    total
}

/// ELBO of the single-cluster model from the core: local step (K = 1, so r = 1), data term from
/// the summaries, Σh, entropy and the allocation term.
fn single_cluster_elbo(obs: &Obs, x: &Array2<f64>, gamma: f64) -> (f64, f64) {
    let n0 = Array1::zeros(1);
    let s0 = Array2::zeros((1, obs.stat_dim()));
    let out = obs.local_step(x.view(), n0.view(), s0.view(), &Alloc::Fixed { log_weights: array![0.0] }, &LocalOptions::default()).unwrap();
    assert_eq!(out.n[0], x.nrows() as f64);
    assert_eq!(out.h[0], 0.0);
    let data = obs.elbo_data(out.n.view(), out.s.view()).unwrap() + out.h_sum + out.h.sum();
    let finite = data + Alloc::Finite { gamma }.elbo(out.n.view()).unwrap();
    let dp = data + Alloc::Dp { gamma }.elbo(out.n.view()).unwrap();
    (finite, dp)
}

fn close(a: f64, b: f64, rtol: f64) -> bool {
    (a - b).abs() <= rtol * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn one_dimensional_gaussians_match_the_student_t_chain() {
    let mut rng = Rng::new(42);
    let gamma = 0.8;
    for &n in &[1usize, 2, 7, 100, 1500] {
        for &scale in &[1e-3, 1.0, 1e3] {
            let xs: Vec<f64> = (0..n).map(|_| scale * (0.7 + 1.3 * rng.normal())).collect();
            let x = Array2::from_shape_vec((n, 1), xs.clone()).unwrap();
            let (nu, kappa, m) = (3.5, 0.25, 0.4 * scale);
            let b = 2.0 * scale * scale;
            let exact = ln_marginal_normal_gamma(&xs, nu, kappa, m, b);

            // full-covariance Gaussian with D = 1 (Normal-Wishart = Normal-Gamma with β = B)
            let gauss = Obs::Gauss(Gauss::new(nu, kappa, array![m], array![[b]]).unwrap());
            let (finite, dp) = single_cluster_elbo(&gauss, &x, gamma);
            assert!(close(finite, exact, 1e-10), "gauss n={n} scale={scale}: {finite} vs {exact}");
            // DP: the allocation term is ln p(z) = ln B(1 + N, γ) − ln B(1, γ); by the chain rule
            // the j-th atom joins stick 1 with probability E[u | j − 1 atoms there] = j / (j + γ)
            let ln_pz = libm::lgamma(1.0 + n as f64) + libm::lgamma(gamma)
                - libm::lgamma(1.0 + n as f64 + gamma)
                - (libm::lgamma(1.0) + libm::lgamma(gamma) - libm::lgamma(1.0 + gamma));
            let chain: f64 = (1..=n).map(|j| (j as f64 / (j as f64 + gamma)).ln()).sum();
            assert!(close(ln_pz, chain, 1e-11), "{ln_pz} vs {chain}");
            assert!(close(dp - ln_pz, exact, 1e-10), "gauss DP n={n} scale={scale}: {} vs {exact}", dp - ln_pz);

            // diagonal Gaussian with D = 1: the same model
            let diag = Obs::DiagGauss(DiagGauss::new(nu, kappa, array![m], array![b]).unwrap());
            let (finite, _) = single_cluster_elbo(&diag, &x, gamma);
            assert!(close(finite, exact, 1e-10), "diag_gauss n={n} scale={scale}: {finite} vs {exact}");

            // zero-mean Gaussian with D = 1
            let zm = Obs::Gauss(Gauss::zero_mean(nu, array![[b]]).unwrap());
            let (finite, _) = single_cluster_elbo(&zm, &x, gamma);
            let exact_zm = ln_marginal_zero_mean(&xs, nu, b);
            assert!(close(finite, exact_zm, 1e-10), "zero_mean n={n} scale={scale}: {finite} vs {exact_zm}");
        }
    }
}

#[test]
fn hand_computed_single_point() {
    // n = 1, x = 1, prior ν = 2, κ = 1, m = 0, β = 2: predictive t with 2 dof, scale² = 2·2/(1·2) = 2,
    // ln t = lnΓ(1.5) − lnΓ(1) − ½ ln(4π) − 1.5 ln(1 + 1/4).
    let expected = libm::lgamma(1.5) - 0.5 * (4.0 * std::f64::consts::PI).ln() - 1.5 * 1.25f64.ln();
    let gauss = Obs::Gauss(Gauss::new(2.0, 1.0, array![0.0], array![[2.0]]).unwrap());
    let (finite, _) = single_cluster_elbo(&gauss, &array![[1.0]], 1.0);
    assert!(close(finite, expected, 1e-13), "{finite} vs {expected}");
}
