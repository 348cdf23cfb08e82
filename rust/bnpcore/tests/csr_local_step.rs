//! The local step of CSR rows (count models) equals the dense step on the same rows: every
//! summary and move output, dense and L-sparse responsibilities, with row weights; it is
//! bit-identical for any rayon pool size; Gaussian models and malformed rows are refused.

mod common;

use bnpcore::alloc::Alloc;
use bnpcore::local::{Carry, CsrIndices, CsrRows, Dest, LocalOptions, LocalOutput, Proposal};
use bnpcore::obs::Obs;
use common::{data, model, resp, Rng};
use ndarray::{Array1, Array2, ArrayView1};

fn to_csr(x: &Array2<f64>) -> (Vec<i64>, Vec<i32>, Vec<f64>) {
    let (mut ip, mut ix, mut dv) = (vec![0i64], Vec::new(), Vec::new());
    for row in x.rows() {
        for (j, &v) in row.iter().enumerate() {
            if v != 0.0 {
                ix.push(j as i32);
                dv.push(v);
            }
        }
        ip.push(ix.len() as i64);
    }
    (ip, ix, dv)
}

fn options<'a>(
    obs: &Obs,
    x: &Array2<f64>,
    k: usize,
    weights: Option<ArrayView1<'a, f64>>,
    top_l: Option<usize>,
    rng: &mut Rng,
) -> LocalOptions<'a> {
    let (fn_, fs) = obs.summarize(x.view(), resp(x.nrows(), 3, rng).view()).unwrap();
    let table = obs.e_log_lik_table(fn_.view(), fs.view()).unwrap();
    LocalOptions {
        weights,
        merge_pairs: vec![(0, k - 1), (1, 2)],
        proposals: vec![
            Proposal { src: vec![0], dest: Dest::Columns(vec![1, 2, 3, 4, 5, k - 1]), carry: None }, // > 4 destinations: the GEMM path
            Proposal { src: vec![1, 2], dest: Dest::Fresh { table, e_log_pi: Array1::from(vec![-0.3, -1.2, -2.0]) }, carry: None },
            Proposal { src: vec![3, 1, 2], dest: Dest::Columns(vec![1, 2]), carry: Some(Carry { anchor: vec![3], cols: vec![1, 2] }) },
        ],
        collect_cols: vec![1, 0],
        cooccur_col: Some(0),
        cooccur_pairs: true,
        return_resp: true,
        top_l,
    }
}

fn close(a: &[f64], b: &[f64], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= 1e-10 * (1.0 + x.abs()), "{what}[{i}]: {x} vs {y}");
    }
}

fn assert_close(a: &LocalOutput, b: &LocalOutput) {
    close(a.n.as_slice().unwrap(), b.n.as_slice().unwrap(), "N");
    close(a.s.as_slice().unwrap(), b.s.as_slice().unwrap(), "S");
    close(a.h.as_slice().unwrap(), b.h.as_slice().unwrap(), "H");
    close(&[a.h_sum, a.lse_sum], &[b.h_sum, b.lse_sum], "h_sum/lse_sum");
    close(a.moves.pair_h.as_slice().unwrap(), b.moves.pair_h.as_slice().unwrap(), "pair_h");
    for (p, q) in a.moves.proposals.iter().zip(&b.moves.proposals) {
        close(p.n.as_slice().unwrap(), q.n.as_slice().unwrap(), "proposal N");
        close(p.s.as_slice().unwrap(), q.s.as_slice().unwrap(), "proposal S");
        close(p.h.as_slice().unwrap(), q.h.as_slice().unwrap(), "proposal H");
    }
    close(a.moves.cols.as_ref().unwrap().as_slice().unwrap(), b.moves.cols.as_ref().unwrap().as_slice().unwrap(), "col");
    close(a.moves.cooccur.as_ref().unwrap().as_slice().unwrap(), b.moves.cooccur.as_ref().unwrap().as_slice().unwrap(), "cooccur");
    match (&a.resp, &b.resp) {
        (Some(r), Some(q)) => close(r.as_slice().unwrap(), q.as_slice().unwrap(), "resp"),
        _ => {
            assert_eq!(a.resp_idx, b.resp_idx);
            close(a.resp_val.as_ref().unwrap().as_slice().unwrap(), b.resp_val.as_ref().unwrap().as_slice().unwrap(), "resp_val");
        }
    }
}

#[test]
fn csr_step_equals_dense_step_for_count_models() {
    for kind in ["mult", "bern"] {
        for top_l in [None, Some(3), Some(7)] {
            let mut rng = Rng::new(5);
            let (n, d, k) = (1300, 9, 7);
            let obs = model(kind, d);
            let mut x = data(kind, n, d, &mut rng);
            x.row_mut(17).fill(0.0); // an empty row
            let (np_, sp) = obs.summarize(x.view(), resp(n, k, &mut rng).view()).unwrap();
            let w = Array1::from_shape_fn(n, |i| (i % 5) as f64 * 0.4);
            let opts = options(&obs, &x, k, Some(w.view()), top_l, &mut rng);
            let alloc = Alloc::Dp { gamma: 2.0 };
            let dense = obs.local_step(x.view(), np_.view(), sp.view(), &alloc, &opts).unwrap();
            let (ip, ix, dv) = to_csr(&x);
            let csr = CsrRows::new(CsrIndices::I64(&ip), CsrIndices::I32(&ix), &dv, d).unwrap();
            let sparse = obs.local_step_csr(&csr, np_.view(), sp.view(), &alloc, &opts).unwrap();
            assert_close(&dense, &sparse);
            // int64 ids, and one or three threads: bit-identical
            let ix64: Vec<i64> = ix.iter().map(|&j| i64::from(j)).collect();
            let csr64 = CsrRows::new(CsrIndices::I64(&ip), CsrIndices::I64(&ix64), &dv, d).unwrap();
            let pool1 = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
            let pool3 = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
            let one = pool1.install(|| obs.local_step_csr(&csr64, np_.view(), sp.view(), &alloc, &opts)).unwrap();
            let three = pool3.install(|| obs.local_step_csr(&csr, np_.view(), sp.view(), &alloc, &opts)).unwrap();
            assert_eq!(
                one.s.as_slice().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                three.s.as_slice().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
            assert_eq!(one.lse_sum.to_bits(), three.lse_sum.to_bits());
            assert_eq!(one.moves.proposals[1].s, three.moves.proposals[1].s);
        }
    }
}

#[test]
fn csr_rows_are_refused_where_they_do_not_apply() {
    let (ip, ix, dv) = (vec![0i64, 2, 3], vec![0i32, 2, 1], vec![1.0, 2.0, 1.0]);
    let csr = CsrRows::new(CsrIndices::I64(&ip), CsrIndices::I32(&ix), &dv, 3).unwrap();
    let (n, s) = (Array1::from(vec![1.0, 1.0]), Array2::from_elem((2, 3), 0.5));
    let opts = LocalOptions::default();
    let alloc = Alloc::Dp { gamma: 1.0 };
    // a Gaussian model
    let g = model("diag_gauss", 3);
    let (gn, gs) = g.summarize(Array2::eye(3).view(), Array2::from_elem((3, 2), 0.5).view()).unwrap();
    assert!(g.local_step_csr(&csr, gn.view(), gs.view(), &alloc, &opts).is_err());
    // Bernoulli rows with a 2; multinomial rows with a negative or fractional count
    assert!(model("bern", 3).local_step_csr(&csr, n.view(), s.view(), &alloc, &opts).is_err());
    for bad in [vec![1.0, -2.0, 1.0], vec![1.0, 2.5, 1.0]] {
        let c = CsrRows::new(CsrIndices::I64(&ip), CsrIndices::I32(&ix), &bad, 3).unwrap();
        assert!(model("mult", 3).local_step_csr(&c, n.view(), s.view(), &alloc, &opts).is_err());
    }
    // wrong number of columns
    let c4 = CsrRows::new(CsrIndices::I64(&ip), CsrIndices::I32(&ix), &dv, 4).unwrap();
    assert!(model("mult", 3).local_step_csr(&c4, n.view(), s.view(), &alloc, &opts).is_err());
    assert!(model("mult", 3).local_step_csr(&csr, n.view(), s.view(), &alloc, &opts).is_ok());
}

#[test]
fn csr_plugin_log_density_equals_dense() {
    for kind in ["mult", "bern"] {
        let mut rng = Rng::new(9);
        let (n, d, k) = (700, 6, 4);
        let obs = model(kind, d);
        let x = data(kind, n, d, &mut rng);
        let (np_, sp) = obs.summarize(x.view(), resp(n, k, &mut rng).view()).unwrap();
        let dense = obs.log_density(x.view(), np_.view(), sp.view()).unwrap();
        let (ip, ix, dv) = to_csr(&x);
        let csr = CsrRows::new(CsrIndices::I64(&ip), CsrIndices::I32(&ix), &dv, d).unwrap();
        let sparse = obs.log_density_csr(&csr, np_.view(), sp.view()).unwrap();
        close(dense.as_slice().unwrap(), sparse.as_slice().unwrap(), "log_density");
    }
    let g = model("gauss", 2);
    let csr = CsrRows::new(CsrIndices::I64(&[0, 1]), CsrIndices::I32(&[0]), &[1.0], 2).unwrap();
    let (gn, gs) = g.summarize(Array2::eye(2).view(), Array2::from_elem((2, 1), 1.0).view()).unwrap();
    assert!(g.log_density_csr(&csr, gn.view(), gs.view()).is_err());
}
