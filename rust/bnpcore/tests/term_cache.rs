//! The memo of per-cluster data terms returns what a fresh computation returns, bit for bit:
//! for every observation model, on summaries that repeat some clusters of earlier calls
//! (reordered, subsets, with changed and with new clusters), and after the memo is emptied.

mod common;

use bnpcore::obs::TermCache;
use common::{Rng, KINDS};
use ndarray::{Array1, Array2, Axis};

fn bits(a: &Array1<f64>) -> Vec<u64> {
    a.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn cached_terms_are_the_computed_terms() {
    let mut rng = Rng::new(11);
    for kind in KINDS.iter().chain(std::iter::once(&"ar_gauss")) {
        let (obs, d) = if *kind == "ar_gauss" {
            let m = bnpcore::obs::ArGauss::new(5.5, Array2::eye(2) * 1.5, Array2::zeros((2, 2)), Array2::eye(2)).unwrap();
            (bnpcore::obs::Obs::ArGauss(m), 2)
        } else {
            (common::model(kind, 4), 4)
        };
        let n_rows = 60;
        let x = if *kind == "ar_gauss" { common::data("gauss", n_rows, 2 * d, &mut rng) } else { common::data(kind, n_rows, d, &mut rng) };
        let k = 7;
        let r = common::resp(n_rows, k, &mut rng);
        let (n, s) = obs.summarize(x.view(), r.view()).unwrap();
        let cache = TermCache::default();
        let want = obs.elbo_data_per_cluster(n.view(), s.view()).unwrap();
        // first call fills the memo; the second is all hits
        for _ in 0..2 {
            let got = obs.elbo_data_per_cluster_cached(&cache, n.view(), s.view()).unwrap();
            assert_eq!(bits(&got), bits(&want), "{kind}");
        }
        assert_eq!(cache.len(), k, "{kind}");
        // a reordered subset, one changed cluster and one new cluster
        let order = [4usize, 0, 2, 6];
        let (mut n2, mut s2) = (n.select(Axis(0), &order), s.select(Axis(0), &order));
        n2[1] *= 0.5;
        s2.row_mut(1).mapv_inplace(|v| v * 0.5);
        let (n3, s3) = (
            ndarray::concatenate(Axis(0), &[n2.view(), n.slice(ndarray::s![3..4])]).unwrap(),
            ndarray::concatenate(
                Axis(0),
                &[s2.view(), (s.slice(ndarray::s![3..4, ..]).to_owned() + s.slice(ndarray::s![5..6, ..])).view()],
            )
            .unwrap(),
        );
        let want3 = obs.elbo_data_per_cluster(n3.view(), s3.view()).unwrap();
        let got3 = obs.elbo_data_per_cluster_cached(&cache, n3.view(), s3.view()).unwrap();
        assert_eq!(bits(&got3), bits(&want3), "{kind}");
        assert_eq!(
            obs.elbo_data_cached(&cache, n3.view(), s3.view()).unwrap().to_bits(),
            obs.elbo_data(n3.view(), s3.view()).unwrap().to_bits(),
            "{kind}"
        );
        // a row equal in value but not in bits (−0 against +0) is not a hit
        if let Some(j) = (0..s.ncols()).find(|&j| s[[0, j]] == 0.0) {
            let mut sz = s.select(Axis(0), &[0]);
            sz[[0, j]] = -sz[[0, j]];
            let nz = n.select(Axis(0), &[0]);
            let got = obs.elbo_data_per_cluster_cached(&cache, nz.view(), sz.view()).unwrap();
            assert_eq!(bits(&got), bits(&obs.elbo_data_per_cluster(nz.view(), sz.view()).unwrap()), "{kind}");
        }
        // cleared, then filled again with the same values
        let before = cache.len();
        assert!(before > 0);
        cache.clear();
        assert!(cache.is_empty());
        assert_eq!(bits(&obs.elbo_data_per_cluster_cached(&cache, n3.view(), s3.view()).unwrap()), bits(&want3), "{kind}");
        // a clone starts empty and still agrees
        let fresh = cache.clone();
        assert!(fresh.is_empty());
        assert_eq!(bits(&obs.elbo_data_per_cluster_cached(&fresh, n3.view(), s3.view()).unwrap()), bits(&want3), "{kind}");
        // bad summaries are refused as by the uncached call
        let mut bad = s.clone();
        bad[[0, 0]] = f64::NAN;
        assert!(obs.elbo_data_per_cluster_cached(&cache, n.view(), bad.view()).is_err());
    }
}

#[test]
fn the_memo_stays_within_its_budget() {
    // rows of 2^20 values (8 MiB each): the memo is emptied before it would pass 64 MiB
    let d = 1 << 20;
    let obs = bnpcore::obs::Obs::Mult(bnpcore::obs::Mult::new(Array1::from_elem(d, 0.3)).unwrap());
    let cache = TermCache::default();
    let mut rng = Rng::new(5);
    for round in 0..3 {
        let s = Array2::from_shape_fn((5, d), |_| if rng.uniform() < 0.01 { 1.0 + round as f64 } else { 0.0 });
        let n = s.sum_axis(Axis(1));
        let got = obs.elbo_data_per_cluster_cached(&cache, n.view(), s.view()).unwrap();
        assert_eq!(bits(&got), bits(&obs.elbo_data_per_cluster(n.view(), s.view()).unwrap()));
        assert!(cache.len() * d * 8 <= TermCache::MAX_BYTES);
    }
}
