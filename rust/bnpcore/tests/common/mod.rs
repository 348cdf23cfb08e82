//! Helpers shared by the integration tests: the crate's one test random generator
//! (`src/test_rng.rs`) and model/data builders for the five observation models.

#![allow(dead_code)]

use bnpcore::obs::{Bern, DiagGauss, Gauss, Mult, Obs};
use ndarray::{Array1, Array2};

#[path = "../../src/test_rng.rs"]
mod test_rng;
pub use test_rng::Rng;

pub const KINDS: [&str; 5] = ["gauss", "diag_gauss", "zero_mean_gauss", "mult", "bern"];

/// A model of the given kind with a simple valid prior in dimension `d`.
pub fn model(kind: &str, d: usize) -> Obs {
    let mut b = Array2::<f64>::eye(d) * 2.0;
    for i in 0..d.saturating_sub(1) {
        b[[i, i + 1]] = 0.3;
        b[[i + 1, i]] = 0.3;
    }
    match kind {
        "gauss" => Obs::Gauss(Gauss::new(d as f64 + 2.5, 0.5, Array1::from_elem(d, 0.2), b).unwrap()),
        "zero_mean_gauss" => Obs::Gauss(Gauss::zero_mean(d as f64 + 2.5, b).unwrap()),
        "diag_gauss" => Obs::DiagGauss(DiagGauss::new(3.5, 0.5, Array1::from_elem(d, -0.1), Array1::from_elem(d, 1.5)).unwrap()),
        "mult" => Obs::Mult(Mult::new(Array1::from_elem(d, 0.4)).unwrap()),
        "bern" => Obs::Bern(Bern::new(Array1::from_elem(d, 0.7), Array1::from_elem(d, 1.3)).unwrap()),
        other => panic!("unknown kind {other}"),
    }
}

/// `n × d` data in the support of `kind` (three well-separated groups).
pub fn data(kind: &str, n: usize, d: usize, rng: &mut Rng) -> Array2<f64> {
    Array2::from_shape_fn((n, d), |(i, j)| {
        let g = (i % 3) as f64;
        match kind {
            "mult" => (rng.below(4) + if (i + j) % 3 == 0 { 5 } else { 0 }) as f64,
            "bern" => {
                if rng.uniform() < 0.2 + 0.3 * g {
                    1.0
                } else {
                    0.0
                }
            }
            _ => 4.0 * g - 4.0 + rng.normal() * (0.5 + 0.2 * j as f64),
        }
    })
}

/// Random responsibilities (rows on the simplex).
pub fn resp(n: usize, k: usize, rng: &mut Rng) -> Array2<f64> {
    let mut r = Array2::from_shape_fn((n, k), |_| rng.uniform() + 1e-3);
    for mut row in r.rows_mut() {
        let s = row.sum();
        row /= s;
    }
    r
}
