//! The fresh-cluster fit of a birth (`bnpcore::fresh`): bit-identical results for any rayon
//! pool size, and input checks.

mod common;

use bnpcore::alloc::Alloc;
use bnpcore::fresh::{FreshFit, FreshOptions};
use bnpcore::obs::Obs;
use bnpcore::Error;
use common::{data, model, Rng, KINDS};
use ndarray::{Array1, Array2};

const OPTS: FreshOptions =
    FreshOptions { n_fresh: 3, n_seeds: 5, iters: 20, kmeans_iters: 10, seed_rows: 1, abandon_loss: None, abandon_after: 0 };

fn setup(kind: &str, n: usize, seed: u64) -> (Obs, Array2<f64>, Array1<f64>, Array1<f64>) {
    let mut rng = Rng::new(seed);
    let d = 4;
    let obs = model(kind, d);
    let x = data(kind, n, d, &mut rng);
    let w = Array1::from_shape_fn(n, |_| rng.uniform() * 1.5);
    let u = Array1::from_shape_fn(OPTS.n_initial(n), |_| rng.uniform());
    (obs, x, w, u)
}

fn bits(f: &Option<FreshFit>) -> Option<Vec<u64>> {
    f.as_ref().map(|f| f.n.iter().chain(f.s.iter()).chain(std::iter::once(&f.gain)).map(|v| v.to_bits()).collect())
}

#[test]
fn bit_identical_for_one_two_and_three_threads() {
    let pools: Vec<rayon::ThreadPool> =
        [1, 2, 3].iter().map(|&t| rayon::ThreadPoolBuilder::new().num_threads(t).build().unwrap()).collect();
    for (i, kind) in KINDS.iter().enumerate() {
        let (obs, x, w, u) = setup(kind, 2000, 40 + i as u64);
        // (and with every fit stopped early: a threshold no gain reaches)
        let stop = FreshOptions { abandon_loss: Some(-1e300), abandon_after: 2, ..OPTS };
        for (alloc, opts) in [(Alloc::Dp { gamma: 1.0 }, OPTS), (Alloc::Finite { gamma: 3.0 }, OPTS), (Alloc::Dp { gamma: 1.0 }, stop)] {
            let runs: Vec<Option<FreshFit>> =
                pools.iter().map(|p| p.install(|| obs.fit_fresh_clusters(x.view(), w.view(), &alloc, u.view(), &opts)).unwrap()).collect();
            assert!(runs[0].is_some(), "{kind}: three separated groups should give a fit");
            assert_eq!(bits(&runs[0]), bits(&runs[1]), "{kind} {alloc:?}");
            assert_eq!(bits(&runs[0]), bits(&runs[2]), "{kind} {alloc:?}");
            let f = runs[0].as_ref().unwrap();
            assert!(f.n.len() >= 2 && f.n.windows(2).into_iter().all(|p| p[0] >= p[1]) && f.n.iter().all(|&v| v >= 1.0));
            assert!(f.gain.is_finite());
        }
    }
}

#[test]
fn bad_input_is_rejected_with_the_argument_named() {
    let (obs, x, w, u) = setup("gauss", 50, 1);
    let dp = Alloc::Dp { gamma: 1.0 };
    let name = |e: Error| match e {
        Error::Shape { name, .. } | Error::InvalidParam { name, .. } | Error::InvalidData { name, .. } => name,
        Error::NonFinite { what } => what,
        other => format!("{other:?}"),
    };
    let mut neg = w.clone();
    neg[3] = -1.0;
    assert_eq!(name(obs.fit_fresh_clusters(x.view(), neg.view(), &dp, u.view(), &OPTS).unwrap_err()), "w");
    let mut nan = w.clone();
    nan[0] = f64::NAN;
    assert_eq!(name(obs.fit_fresh_clusters(x.view(), nan.view(), &dp, u.view(), &OPTS).unwrap_err()), "w");
    let short = w.slice(ndarray::s![..49]).to_owned();
    assert_eq!(name(obs.fit_fresh_clusters(x.view(), short.view(), &dp, u.view(), &OPTS).unwrap_err()), "w");
    let one = FreshOptions { n_fresh: 1, ..OPTS };
    assert_eq!(name(obs.fit_fresh_clusters(x.view(), w.view(), &dp, u.view(), &one).unwrap_err()), "n_fresh");
    let u4 = u.slice(ndarray::s![..4]).to_owned();
    assert_eq!(name(obs.fit_fresh_clusters(x.view(), w.view(), &dp, u4.view(), &OPTS).unwrap_err()), "uniforms");
    let mut u_bad = u.clone();
    u_bad[0] = 1.0;
    assert_eq!(name(obs.fit_fresh_clusters(x.view(), w.view(), &dp, u_bad.view(), &OPTS).unwrap_err()), "uniforms");
    let bad_gamma = Alloc::Finite { gamma: 0.0 };
    assert_eq!(name(obs.fit_fresh_clusters(x.view(), w.view(), &bad_gamma, u.view(), &OPTS).unwrap_err()), "gamma");
    let mut xn = x.clone();
    xn[[2, 1]] = f64::INFINITY;
    assert!(matches!(obs.fit_fresh_clusters(xn.view(), w.view(), &dp, u.view(), &OPTS), Err(Error::NonFinite { .. })));
}

#[test]
fn too_few_rows_or_too_little_weight_give_no_fit() {
    let (obs, x, w, _) = setup("diag_gauss", 3, 2);
    let none = obs.fit_fresh_clusters(x.view(), w.view(), &Alloc::Dp { gamma: 1.0 }, Array1::zeros(0).view(), &OPTS).unwrap();
    assert!(none.is_none());
    // total weight below one atom: every cluster is dropped
    let (obs, x, _, u) = setup("diag_gauss", 100, 3);
    let tiny = Array1::from_elem(100, 1e-3);
    assert!(obs.fit_fresh_clusters(x.view(), tiny.view(), &Alloc::Dp { gamma: 1.0 }, u.view(), &OPTS).unwrap().is_none());
}
