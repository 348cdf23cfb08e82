//! Invariants of the fused local step for every observation model:
//! summaries additive over disjoint splits, responsibilities on the simplex even with extreme
//! log weights, and bit-identical results for any rayon pool size.

mod common;

use bnpcore::alloc::Alloc;
use bnpcore::local::{Carry, Dest, LocalOptions, LocalOutput, Proposal};
use bnpcore::obs::Obs;
use bnpcore::Error;
use common::{data, model, resp, Rng, KINDS};
use ndarray::{s, Array1, Array2, ArrayView1};

/// Posterior summaries (N, S) of `k` clusters from random responsibilities.
fn posterior(obs: &Obs, x: &Array2<f64>, k: usize, rng: &mut Rng) -> (Array1<f64>, Array2<f64>) {
    obs.summarize(x.view(), resp(x.nrows(), k, rng).view()).unwrap()
}

fn options<'a>(obs: &Obs, x: &Array2<f64>, k: usize, weights: Option<ArrayView1<'a, f64>>, rng: &mut Rng) -> LocalOptions<'a> {
    let (fn_, fs) = posterior(obs, x, 2, rng);
    let table = obs.e_log_lik_table(fn_.view(), fs.view()).unwrap();
    LocalOptions {
        weights,
        merge_pairs: vec![(0, k - 1), (1, 2)],
        proposals: vec![
            Proposal { src: vec![0], dest: Dest::Columns(vec![1, k - 1]), carry: None },
            Proposal { src: vec![1, 2], dest: Dest::Fresh { table, e_log_pi: Array1::from(vec![-0.3, -1.2]) }, carry: None },
            // a delete re-spreading only its target's rows
            Proposal { src: vec![2, 0, 1], dest: Dest::Columns(vec![0, 1]), carry: Some(Carry { anchor: vec![2], cols: vec![0, 1] }) },
        ],
        collect_cols: vec![1, 0],
        cooccur_col: Some(0),
        cooccur_pairs: true,
        return_resp: true,
        top_l: None,
    }
}

fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn assert_bit_identical(a: &LocalOutput, b: &LocalOutput) {
    assert!(same_bits(a.n.as_slice().unwrap(), b.n.as_slice().unwrap()), "N");
    assert!(same_bits(a.s.as_slice().unwrap(), b.s.as_slice().unwrap()), "S");
    assert!(same_bits(a.h.as_slice().unwrap(), b.h.as_slice().unwrap()), "H");
    assert!(same_bits(a.moves.pair_h.as_slice().unwrap(), b.moves.pair_h.as_slice().unwrap()), "pair_h");
    assert_eq!(a.h_sum.to_bits(), b.h_sum.to_bits());
    assert_eq!(a.lse_sum.to_bits(), b.lse_sum.to_bits());
    for (p, q) in a.moves.proposals.iter().zip(&b.moves.proposals) {
        assert!(same_bits(p.n.as_slice().unwrap(), q.n.as_slice().unwrap()), "proposal N");
        assert!(same_bits(p.s.as_slice().unwrap(), q.s.as_slice().unwrap()), "proposal S");
        assert!(same_bits(p.h.as_slice().unwrap(), q.h.as_slice().unwrap()), "proposal H");
    }
    assert!(same_bits(a.resp.as_ref().unwrap().as_slice().unwrap(), b.resp.as_ref().unwrap().as_slice().unwrap()), "resp");
    assert!(same_bits(a.moves.cols.as_ref().unwrap().as_slice().unwrap(), b.moves.cols.as_ref().unwrap().as_slice().unwrap()), "col");
    assert!(
        same_bits(a.moves.cooccur.as_ref().unwrap().as_slice().unwrap(), b.moves.cooccur.as_ref().unwrap().as_slice().unwrap()),
        "cooccur"
    );
}

#[test]
fn bit_identical_for_one_and_three_threads() {
    let pool1 = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let pool3 = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    for kind in KINDS {
        let mut rng = Rng::new(7);
        let (n, d, k) = (4099, 4, 5); // 9 chunks of 512 rows, the last one partial
        let obs = model(kind, d);
        let x = data(kind, n, d, &mut rng);
        let (np_, sp) = posterior(&obs, &x, k, &mut rng);
        let e = Array1::from(vec![-1.0, -1.5, -2.0, -0.5, -3.0]);
        let w = Array1::from_shape_fn(n, |i| (i % 7) as f64 * 0.3);
        let opts = options(&obs, &x, k, Some(w.view()), &mut rng);
        let one =
            pool1.install(|| obs.local_step(x.view(), np_.view(), sp.view(), &Alloc::Fixed { log_weights: e.clone() }, &opts)).unwrap();
        let three =
            pool3.install(|| obs.local_step(x.view(), np_.view(), sp.view(), &Alloc::Fixed { log_weights: e.clone() }, &opts)).unwrap();
        assert_bit_identical(&one, &three);
        // and the other parallel kernels
        let r = resp(n, k, &mut rng);
        let a = pool1.install(|| obs.summarize(x.view(), r.view())).unwrap();
        let b = pool3.install(|| obs.summarize(x.view(), r.view())).unwrap();
        assert!(same_bits(a.1.as_slice().unwrap(), b.1.as_slice().unwrap()), "{kind} summarize");
        let a = pool1.install(|| obs.e_log_lik(x.view(), np_.view(), sp.view())).unwrap();
        let b = pool3.install(|| obs.e_log_lik(x.view(), np_.view(), sp.view())).unwrap();
        assert!(same_bits(a.as_slice().unwrap(), b.as_slice().unwrap()), "{kind} e_log_lik");
        let u = Array1::from(vec![0.1, 0.7, 0.3, 0.95]);
        let a = pool1.install(|| obs.kmeanspp(x.view(), u.view())).unwrap();
        let b = pool3.install(|| obs.kmeanspp(x.view(), u.view())).unwrap();
        assert_eq!(a, b, "{kind} kmeanspp");
    }
}

fn assert_additive(total: &[f64], parts: &[Vec<f64>], what: &str) {
    for (i, &t) in total.iter().enumerate() {
        let sum: f64 = parts.iter().map(|p| p[i]).sum();
        let mag: f64 = parts.iter().map(|p| p[i].abs()).sum();
        assert!((sum - t).abs() <= 1e-12 * mag.max(1e-300), "{what}[{i}]: {sum} vs {t}");
    }
}

#[test]
fn summaries_are_additive_over_disjoint_splits() {
    for kind in KINDS {
        let mut rng = Rng::new(11);
        let (n, d, k) = (1700, 3, 4);
        let obs = model(kind, d);
        let x = data(kind, n, d, &mut rng);
        let (np_, sp) = posterior(&obs, &x, k, &mut rng);
        let e = Array1::from(vec![-1.0, -1.5, -2.0, -0.5]);
        let w = Array1::from_shape_fn(n, |_| rng.uniform() * 2.0);
        let mut opts = options(&obs, &x, k, Some(w.view()), &mut rng);
        opts.return_resp = false;
        opts.collect_cols = Vec::new();
        let whole = obs.local_step(x.view(), np_.view(), sp.view(), &Alloc::Fixed { log_weights: e.clone() }, &opts).unwrap();
        let cuts = [0usize, 1, 600, 1023, 1024, 1700];
        let mut parts = Vec::new();
        for c in cuts.windows(2) {
            let mut o = opts.clone();
            o.weights = Some(w.slice(s![c[0]..c[1]]));
            parts.push(
                obs.local_step(x.slice(s![c[0]..c[1], ..]), np_.view(), sp.view(), &Alloc::Fixed { log_weights: e.clone() }, &o).unwrap(),
            );
        }
        let v = |f: &dyn Fn(&LocalOutput) -> Vec<f64>| parts.iter().map(f).collect::<Vec<_>>();
        assert_additive(whole.n.as_slice().unwrap(), &v(&|p| p.n.to_vec()), &format!("{kind} N"));
        assert_additive(whole.s.as_slice().unwrap(), &v(&|p| p.s.iter().copied().collect()), &format!("{kind} S"));
        assert_additive(whole.h.as_slice().unwrap(), &v(&|p| p.h.to_vec()), &format!("{kind} H"));
        assert_additive(whole.moves.pair_h.as_slice().unwrap(), &v(&|p| p.moves.pair_h.to_vec()), &format!("{kind} pair_h"));
        assert_additive(&[whole.h_sum, whole.lse_sum], &v(&|p| vec![p.h_sum, p.lse_sum]), &format!("{kind} h_sum/lse_sum"));
        assert_additive(
            whole.moves.cooccur.as_ref().unwrap().as_slice().unwrap(),
            &v(&|p| p.moves.cooccur.as_ref().unwrap().to_vec()),
            &format!("{kind} cooccur"),
        );
        for j in 0..whole.moves.proposals.len() {
            assert_additive(
                whole.moves.proposals[j].n.as_slice().unwrap(),
                &v(&|p| p.moves.proposals[j].n.to_vec()),
                &format!("{kind} proposal {j} N"),
            );
            assert_additive(
                whole.moves.proposals[j].s.as_slice().unwrap(),
                &v(&|p| p.moves.proposals[j].s.iter().copied().collect()),
                &format!("{kind} proposal {j} S"),
            );
            assert_additive(
                whole.moves.proposals[j].h.as_slice().unwrap(),
                &v(&|p| p.moves.proposals[j].h.to_vec()),
                &format!("{kind} proposal {j} H"),
            );
        }
        // the plain summarize kernel too
        let r = resp(n, k, &mut rng);
        let (tn, ts) = obs.summarize(x.view(), r.view()).unwrap();
        let pieces: Vec<_> =
            cuts.windows(2).map(|c| obs.summarize(x.slice(s![c[0]..c[1], ..]), r.slice(s![c[0]..c[1], ..])).unwrap()).collect();
        assert_additive(tn.as_slice().unwrap(), &pieces.iter().map(|p| p.0.to_vec()).collect::<Vec<_>>(), &format!("{kind} summarize N"));
        assert_additive(
            ts.as_slice().unwrap(),
            &pieces.iter().map(|p| p.1.iter().copied().collect()).collect::<Vec<_>>(),
            &format!("{kind} summarize S"),
        );
    }
}

fn assert_simplex_rows(out: &LocalOutput, what: &str) {
    let r = out.resp.as_ref().unwrap();
    for (i, row) in r.rows().into_iter().enumerate() {
        assert!(row.iter().all(|v| v.is_finite() && *v >= 0.0), "{what}: row {i} = {row}");
        assert!((row.sum() - 1.0).abs() <= 1e-12, "{what}: row {i} sums to {}", row.sum());
    }
    for v in out.n.iter().chain(out.s.iter()).chain(out.h.iter()).chain(out.moves.pair_h.iter()) {
        assert!(v.is_finite(), "{what}: non-finite summary");
    }
    assert!(out.h.iter().all(|&h| h >= 0.0), "{what}: negative entropy");
    for p in &out.moves.proposals {
        assert!(p.n.iter().chain(p.s.iter()).chain(p.h.iter()).all(|v| v.is_finite()), "{what}: non-finite proposal");
    }
}

#[test]
fn responsibilities_sum_to_one_with_extreme_log_weights() {
    for kind in KINDS {
        let mut rng = Rng::new(3);
        let (n, d, k) = (600, 3, 5);
        let obs = model(kind, d);
        let mut x = data(kind, n, d, &mut rng);
        if kind.contains("gauss") {
            // a few rows very far away: E[log F] of order -1e10
            x.row_mut(0).fill(1e5);
            x.row_mut(1).fill(-3e4);
        }
        let (np_, sp) = posterior(&obs, &x, k, &mut rng);
        let cases: Vec<(&str, Vec<f64>)> = vec![
            ("±1e5", vec![1e5, -1e5, 0.0, 1e5 - 1e-3, -1e5]),
            ("-inf entries", vec![f64::NEG_INFINITY, -1.0, f64::NEG_INFINITY, -2.0, f64::NEG_INFINITY]),
            ("one finite", vec![f64::NEG_INFINITY, f64::NEG_INFINITY, -1e5, f64::NEG_INFINITY, f64::NEG_INFINITY]),
            ("all -inf", vec![f64::NEG_INFINITY; 5]),
            ("huge and -inf", vec![1e300, f64::NEG_INFINITY, -1e300, 0.0, 1e300]),
        ];
        for (name, e) in cases {
            let e = Array1::from(e);
            let opts = options(&obs, &x, k, None, &mut rng);
            let out = obs.local_step(x.view(), np_.view(), sp.view(), &Alloc::Fixed { log_weights: e.clone() }, &opts).unwrap();
            let what = format!("{kind} {name}");
            assert_simplex_rows(&out, &what);
            let r = out.resp.as_ref().unwrap();
            for (j, &ej) in e.iter().enumerate() {
                if ej == f64::NEG_INFINITY && e.iter().any(|v| v.is_finite()) {
                    assert!(r.column(j).iter().all(|&v| v == 0.0), "{what}: impossible cluster {j} got mass");
                }
            }
            if e.iter().all(|v| *v == f64::NEG_INFINITY) {
                assert!(r.iter().all(|&v| v == 0.2), "{what}: all -inf rows must be uniform");
                let want = n as f64 * (5f64).ln() / 5.0;
                assert!(out.h.iter().all(|&h| (h - want).abs() <= 1e-9 * want), "{what}: H = {}", out.h);
            }
        }
    }
}

#[test]
fn bad_options_are_errors_not_panics() {
    let mut rng = Rng::new(5);
    let obs = model("gauss", 2);
    let x = data("gauss", 30, 2, &mut rng);
    let (np_, sp) = posterior(&obs, &x, 3, &mut rng);
    let e = Array1::zeros(3);
    let fixed = |w: Array1<f64>| Alloc::Fixed { log_weights: w };
    let run = |o: LocalOptions| obs.local_step(x.view(), np_.view(), sp.view(), &fixed(e.clone()), &o);
    // each bad option is the right error variant and names the offending argument
    let expect = |r: bnpcore::Result<_>, want: fn(&Error) -> bool, name: &str| match r {
        Err(err) => {
            assert!(want(&err), "unexpected error variant for `{name}`: {err:?}");
            assert!(err.to_string().contains(name), "the message does not name `{name}`: {err}");
        }
        Ok(_) => panic!("no error for a bad `{name}`"),
    };
    let param = |e: &Error| matches!(e, Error::InvalidParam { .. });
    let shape = |e: &Error| matches!(e, Error::Shape { .. });
    expect(run(LocalOptions { merge_pairs: vec![(0, 3)], ..Default::default() }), param, "merge_pairs");
    expect(run(LocalOptions { merge_pairs: vec![(1, 1)], ..Default::default() }), param, "merge_pairs");
    expect(run(LocalOptions { collect_cols: vec![0, 3], ..Default::default() }), param, "collect_cols");
    expect(run(LocalOptions { cooccur_col: Some(9), ..Default::default() }), param, "cooccur_col");
    expect(
        run(LocalOptions { proposals: vec![Proposal { src: vec![], dest: Dest::Columns(vec![0]), carry: None }], ..Default::default() }),
        param,
        "proposals",
    );
    expect(
        run(LocalOptions { proposals: vec![Proposal { src: vec![0], dest: Dest::Columns(vec![3]), carry: None }], ..Default::default() }),
        param,
        "proposals",
    );
    let short = Array1::ones(29);
    expect(run(LocalOptions { weights: Some(short.view()), ..Default::default() }), shape, "weights");
    expect(obs.local_step(x.view(), np_.view(), sp.view(), &fixed(Array1::zeros(2)), &LocalOptions::default()), shape, "e_log_pi");
    expect(obs.local_step(x.slice(s![.., 0..1]), np_.view(), sp.view(), &fixed(e.clone()), &LocalOptions::default()), shape, "X");
    expect(obs.local_step(x.view(), np_.slice(s![0..2]), sp.view(), &fixed(e.clone()), &LocalOptions::default()), shape, "S"); // N sets K, so the 3-row S is the mismatch
    let nan_x = Array2::from_elem((2, 2), f64::NAN);
    expect(
        obs.local_step(nan_x.view(), np_.view(), sp.view(), &fixed(e.clone()), &LocalOptions::default()),
        |e| matches!(e, Error::NonFinite { .. }),
        "X",
    );
    // a Fortran-ordered statistic matrix works (no panic) and gives the same answer
    let sf = {
        let mut t = Array2::<f64>::zeros((sp.ncols(), sp.nrows()));
        t.assign(&sp.t());
        t.reversed_axes()
    };
    assert!(!sf.is_standard_layout());
    let a = obs.local_step(x.view(), np_.view(), sf.view(), &Alloc::Fixed { log_weights: e.clone() }, &LocalOptions::default()).unwrap();
    let b = obs.local_step(x.view(), np_.view(), sp.view(), &Alloc::Fixed { log_weights: e.clone() }, &LocalOptions::default()).unwrap();
    assert_eq!(a.n, b.n);
    assert!((obs.elbo_data(np_.view(), sf.view()).unwrap() - obs.elbo_data(np_.view(), sp.view()).unwrap()).abs() < 1e-12);
}
