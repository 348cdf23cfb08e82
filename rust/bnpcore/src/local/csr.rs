//! Compressed sparse rows for the mixture local step of count models (`mult`, `bern`), whose
//! feature map is the identity: `W = X Wt + cst` and `Acc += Rᵀ X` cost `O(nnz · K)` instead of
//! `O(rows · V · K)`, and the batch is borrowed as scipy stores it (no dense copy).
//!
//! A tile's features are a [`Feats`]: the dense `φ(X)` of the tile, or its CSR rows. The four
//! operations the tile code needs on them — evaluate a log-likelihood table, a dot product
//! with one row, `acc += Σ c_i φ(x_i)` over a list of rows, and `Acc += Cᵀ φ(X)` — are
//! implemented for both, so the dense, L-sparse and restricted-step code paths are shared.

use ndarray::{Array2, ArrayView2, ArrayViewMut2, Axis};

use super::axpy_rows;
use super::doc_topic::CsrIndex;
use crate::error::{Error, Result};
use crate::linalg::gemm;
use crate::obs::{FeatureMap, LogLikTable, ObsModel};

/// Column ids of CSR rows as scipy stores them (`int32` or `int64`).
#[derive(Clone, Copy, Debug)]
pub enum CsrIndices<'a> {
    /// `int32` ids
    I32(&'a [i32]),
    /// `int64` ids
    I64(&'a [i64]),
}

/// Validated compressed sparse rows: offsets (owned, `n_rows + 1`), borrowed column ids and
/// values.
#[derive(Clone, Debug)]
pub struct CsrRows<'a> {
    indptr: Vec<usize>,
    indices: CsrIndices<'a>,
    data: &'a [f64],
    n_cols: usize,
}

/// CSR offsets as `usize`: non-empty, non-negative, non-decreasing, starting at 0 (the
/// mixture's CSR rows and the topic model's documents).
pub(crate) fn offsets<I: CsrIndex>(ip: &[I]) -> Result<Vec<usize>> {
    if ip.is_empty() {
        return Err(Error::shape("indptr", "(n_rows + 1,)", "(0,)"));
    }
    let mut offs = Vec::with_capacity(ip.len());
    for &x in ip {
        let o = x.checked().ok_or_else(|| Error::data("indptr", "offsets must be >= 0"))?;
        if offs.last().is_some_and(|&prev| o < prev) {
            return Err(Error::data("indptr", "offsets must be non-decreasing"));
        }
        offs.push(o);
    }
    if offs[0] != 0 {
        return Err(Error::data("indptr", format!("must start at 0, got {}", offs[0])));
    }
    Ok(offs)
}

fn check_ids<I: CsrIndex>(ids: &[I], n_cols: usize) -> Result<()> {
    if let Some(bad) = ids.iter().find(|&&j| j.checked().is_none_or(|j| j >= n_cols)) {
        let shown = bad.checked().map_or_else(|| "a negative id".to_string(), |j| j.to_string());
        return Err(Error::data("indices", format!("column ids must be in [0, n_features = {n_cols}), got {shown}")));
    }
    Ok(())
}

impl<'a> CsrRows<'a> {
    /// Check the structure (offsets start at 0, non-decreasing, end at `nnz`; ids in
    /// `[0, n_cols)`) and finiteness of the values. The support of the values (counts, 0/1) is
    /// the observation model's check ([`crate::obs::ObsModel::check_sparse_values`]).
    ///
    /// # Errors
    /// [`Error::Shape`] or [`Error::InvalidData`] naming the offending array.
    pub fn new(indptr: CsrIndices<'_>, indices: CsrIndices<'a>, data: &'a [f64], n_cols: usize) -> Result<CsrRows<'a>> {
        let indptr = match indptr {
            CsrIndices::I32(p) => offsets(p)?,
            CsrIndices::I64(p) => offsets(p)?,
        };
        let nnz = indptr[indptr.len() - 1];
        let n_ids = match indices {
            CsrIndices::I32(i) => i.len(),
            CsrIndices::I64(i) => i.len(),
        };
        if n_ids != nnz || data.len() != nnz {
            return Err(Error::shape("indices/data", format!("length indptr[-1] = {nnz}"), format!("{n_ids} / {}", data.len())));
        }
        match indices {
            CsrIndices::I32(i) => check_ids(i, n_cols)?,
            CsrIndices::I64(i) => check_ids(i, n_cols)?,
        }
        if data.iter().any(|v| !v.is_finite()) {
            return Err(Error::NonFinite { what: "`X` (sparse values)".into() });
        }
        Ok(CsrRows { indptr, indices, data, n_cols })
    }

    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.indptr.len() - 1
    }

    /// Number of columns.
    pub fn n_cols(&self) -> usize {
        self.n_cols
    }

    /// The stored values (all rows).
    pub fn values(&self) -> &[f64] {
        self.data
    }

    /// `f(column, value)` for every stored entry of row `row`, in storage order.
    #[inline]
    pub fn for_each(&self, row: usize, mut f: impl FnMut(usize, f64)) {
        let (lo, hi) = (self.indptr[row], self.indptr[row + 1]);
        let vals = &self.data[lo..hi];
        match self.indices {
            CsrIndices::I32(ix) => ix[lo..hi].iter().zip(vals).for_each(|(&j, &v)| f(j.fast(), v)),
            CsrIndices::I64(ix) => ix[lo..hi].iter().zip(vals).for_each(|(&j, &v)| f(j.fast(), v)),
        }
    }
}

/// Features of one tile: dense `φ(X)` (`rows × F`), CSR rows `r0..r0 + rows` of a batch
/// (identity feature map, `F = n_cols`), or the tile's rows `x` with their map, features built
/// only for the rows read (`Lazy`: the L-sparse Gaussian path with f32 candidates needs no
/// features of its own, only the restricted steps read a few rows' features).
#[derive(Clone, Copy)]
pub(crate) enum Feats<'a> {
    Dense(ArrayView2<'a, f64>),
    Csr { rows: &'a CsrRows<'a>, r0: usize },
    Lazy { x: ArrayView2<'a, f64>, map: &'a FeatureMap },
}

thread_local! {
    /// Feature rows built by [`Feats::Lazy`] (reused across calls on the thread).
    static LAZY_FEATS: std::cell::RefCell<Vec<f64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `f(φ)` with `φ` the features of rows `idx` of `x` (in that order), built in a per-thread buffer.
fn with_lazy_rows<R>(x: ArrayView2<f64>, map: &FeatureMap, idx: &[usize], f: impl FnOnce(ArrayView2<f64>) -> R) -> R {
    LAZY_FEATS.with(|buf| {
        let mut buf = buf.borrow_mut();
        let sub = x.select(Axis(0), idx);
        f(map.apply(sub.view(), &mut buf))
    })
}

impl Feats<'_> {
    /// `out = φ W + cst` (`rows × K`, overwritten).
    pub(crate) fn eval(&self, table: &LogLikTable, mut out: ArrayViewMut2<f64>) {
        match self {
            Feats::Dense(phi) => table.eval_features(*phi, out),
            Feats::Lazy { x, map } => {
                let mut buf = Vec::new();
                table.eval_features(map.apply(*x, &mut buf), out)
            }
            Feats::Csr { rows, r0 } => {
                let LogLikTable::Lin { w, cst, .. } = table;
                let c = cst.as_slice().expect("contiguous");
                for (n, mut o) in out.rows_mut().into_iter().enumerate() {
                    let o = o.as_slice_mut().expect("contiguous");
                    o.copy_from_slice(c);
                    rows.for_each(r0 + n, |j, v| {
                        let wr = w.row(j);
                        o.iter_mut().zip(wr.iter()).for_each(|(a, &b)| *a += v * b);
                    });
                }
            }
        }
    }

    /// `φ(x_n) · w` (`w` of length `F`).
    #[inline]
    pub(crate) fn dot_row(&self, n: usize, w: &[f64]) -> f64 {
        match self {
            Feats::Dense(phi) => super::cand32::dot(phi.row(n).as_slice().expect("contiguous"), w),
            Feats::Lazy { x, map } => {
                with_lazy_rows(*x, map, &[n], |phi| super::cand32::dot(phi.row(0).as_slice().expect("contiguous"), w))
            }
            Feats::Csr { rows, r0 } => {
                let mut s = 0.0;
                rows.for_each(r0 + n, |j, v| s += v * w[j]);
                s
            }
        }
    }

    /// Accumulator `jj` `+= Σ_i c_i φ(x_{n_i})` over `(n_i, c_i)` pairs: row `jj` of the `J × F`
    /// accumulator (dense), column `jj` of the transposed `F × J` one (CSR).
    pub(crate) fn axpy_rows_into(&self, acc: &mut Array2<f64>, jj: usize, list: &[(u32, f64)]) {
        match self {
            Feats::Dense(phi) => {
                let mut row = acc.row_mut(jj);
                axpy_rows(row.as_slice_mut().expect("contiguous"), phi, list);
            }
            Feats::Lazy { x, map } => {
                // the listed rows' features, in list order: the same arithmetic as `Dense`
                let idx: Vec<usize> = list.iter().map(|&(n, _)| n as usize).collect();
                let local: Vec<(u32, f64)> = list.iter().enumerate().map(|(i, &(_, c))| (i as u32, c)).collect();
                with_lazy_rows(*x, map, &idx, |phi| {
                    let mut row = acc.row_mut(jj);
                    axpy_rows(row.as_slice_mut().expect("contiguous"), &phi, &local);
                });
            }
            Feats::Csr { rows, r0 } => {
                for &(n, c) in list {
                    rows.for_each(r0 + n as usize, |j, v| acc[[j, jj]] += c * v);
                }
            }
        }
    }

    /// `acc += coefᵀ φ` (`coef` is `rows × J`); `acc` is `J × F` (dense) or its transpose
    /// `F × J` (CSR: one contiguous `J`-vector update per stored entry).
    pub(crate) fn add_t_product(&self, coef: ArrayView2<f64>, mut acc: ArrayViewMut2<f64>) {
        match self {
            Feats::Dense(phi) => gemm(1.0, coef.t(), *phi, 1.0, acc),
            Feats::Lazy { x, map } => {
                let mut buf = Vec::new();
                gemm(1.0, coef.t(), map.apply(*x, &mut buf), 1.0, acc)
            }
            Feats::Csr { rows, r0 } => {
                for (n, cr) in coef.rows().into_iter().enumerate() {
                    let cr = cr.to_slice().expect("contiguous coefficient rows");
                    rows.for_each(r0 + n, |j, v| {
                        let mut a = acc.row_mut(j);
                        a.as_slice_mut().expect("contiguous").iter_mut().zip(cr).for_each(|(a, &c)| *a += v * c);
                    });
                }
            }
        }
    }
}

/// CSR rows for `model` and its `table`: values in the model's support (only count models take
/// sparse rows, [`ObsModel::check_sparse_values`]), identity feature maps, `n_features` columns.
pub(crate) fn check_csr_rows<M: ObsModel>(model: &M, x: &CsrRows, table: &LogLikTable) -> Result<()> {
    model.check_sparse_values(x.values(), "X")?;
    let identity = crate::obs::FeatureMap::Identity;
    if model.feature_map() != identity || *table.feature_map() != identity {
        return Err(Error::param("X", "sparse rows need an observation model with the identity feature map (mult, bern)"));
    }
    if x.n_cols() != model.n_features() {
        return Err(Error::shape("X", format!("(n_samples, {})", model.n_features()), format!("({}, {})", x.n_rows(), x.n_cols())));
    }
    Ok(())
}

/// `φ(X) W + cst` of every CSR row (`n_rows × K`), in parallel over tiles of rows.
pub fn eval_table_csr(table: &LogLikTable, x: &CsrRows) -> ndarray::Array2<f64> {
    use ndarray::Axis;
    use rayon::prelude::*;
    let tile = crate::parallel::TILE_ROWS;
    let mut out = ndarray::Array2::<f64>::zeros((x.n_rows(), table.n_clusters()));
    out.axis_chunks_iter_mut(Axis(0), tile).into_par_iter().enumerate().for_each(|(i, o)| {
        Feats::Csr { rows: x, r0: i * tile }.eval(table, o);
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, Array1, Array2};

    fn dense_and_csr() -> (Array2<f64>, Vec<i64>, Vec<i32>, Vec<f64>) {
        let x = array![[0.0, 2.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [3.0, 0.0, 1.0, 0.0]];
        (x, vec![0, 2, 2, 4], vec![1, 3, 0, 2], vec![2.0, 1.0, 3.0, 1.0])
    }

    /// Every operation on CSR rows equals the same operation on the dense rows.
    #[test]
    fn csr_features_agree_with_dense_features() {
        let (x, ip, ix, dv) = dense_and_csr();
        let csr = CsrRows::new(CsrIndices::I64(&ip), CsrIndices::I32(&ix), &dv, 4).unwrap();
        let (fd, fs) = (Feats::Dense(x.view()), Feats::Csr { rows: &csr, r0: 0 });
        let w = array![[0.5, -1.0], [2.0, 0.25], [-0.5, 1.5], [1.0, 1.0]];
        let table = LogLikTable::Lin { feat: crate::obs::FeatureMap::Identity, w, cst: Array1::from(vec![0.1, -0.2]) };
        let (mut a, mut b) = (Array2::zeros((3, 2)), Array2::zeros((3, 2)));
        fd.eval(&table, a.view_mut());
        fs.eval(&table, b.view_mut());
        assert!(a.iter().zip(&b).all(|(p, q)| (p - q).abs() < 1e-14));
        let v = [1.0, -2.0, 0.5, 3.0];
        for n in 0..3 {
            assert!((fd.dot_row(n, &v) - fs.dot_row(n, &v)).abs() < 1e-14);
        }
        let list = [(0u32, 0.5), (2, 2.0), (1, 7.0)];
        // dense accumulators are J × F, CSR ones their transpose F × J
        let (mut p, mut q) = (Array2::ones((2, 4)), Array2::ones((4, 2)));
        fd.axpy_rows_into(&mut p, 1, &list);
        fs.axpy_rows_into(&mut q, 1, &list);
        assert!(p.iter().zip(q.t().iter()).all(|(a, b)| (a - b).abs() < 1e-14));
        let coef = array![[0.2, 0.8], [1.0, 0.0], [0.6, 0.4]];
        let (mut s, mut t) = (Array2::ones((2, 4)), Array2::ones((4, 2)));
        fd.add_t_product(coef.view(), s.view_mut());
        fs.add_t_product(coef.view(), t.view_mut());
        assert!(s.iter().zip(t.t().iter()).all(|(p, q)| (p - q).abs() < 1e-14));
        // a tile starting at row 2
        let f2 = Feats::Csr { rows: &csr, r0: 2 };
        assert!((f2.dot_row(0, &v) - fd.dot_row(2, &v)).abs() < 1e-14);
    }

    #[test]
    fn malformed_csr_is_an_error() {
        let (_, ip, ix, dv) = dense_and_csr();
        assert!(CsrRows::new(CsrIndices::I64(&ip), CsrIndices::I32(&ix), &dv, 3).is_err()); // id 3 >= 3 columns
        assert!(CsrRows::new(CsrIndices::I64(&[0, 3, 2, 4]), CsrIndices::I32(&ix), &dv, 4).is_err()); // decreasing
        assert!(CsrRows::new(CsrIndices::I64(&[1, 2, 2, 4]), CsrIndices::I32(&ix), &dv, 4).is_err()); // start
        assert!(CsrRows::new(CsrIndices::I64(&ip), CsrIndices::I32(&ix[..3]), &dv, 4).is_err()); // lengths
        assert!(CsrRows::new(CsrIndices::I64(&ip), CsrIndices::I32(&[1, -3, 0, 2]), &dv, 4).is_err()); // negative
        assert!(CsrRows::new(CsrIndices::I64(&ip), CsrIndices::I32(&ix), &[2.0, f64::NAN, 3.0, 1.0], 4).is_err());
        let ok = CsrRows::new(CsrIndices::I64(&ip), CsrIndices::I32(&ix), &dv, 4).unwrap();
        assert_eq!((ok.n_rows(), ok.n_cols()), (3, 4));
    }
}
