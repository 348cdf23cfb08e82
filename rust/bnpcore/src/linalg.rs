//! Small dense linear-algebra helpers: a safe wrapper over `matrixmultiply`'s GEMM (the
//! workhorse of every local and summary step), Cholesky factorisation and triangular inversion.
//!
//! `matrixmultiply` is used rather than a BLAS binding or `faer` because it is pure Rust (no
//! system library, fast to build), detects AVX2/FMA at run time and reaches a large fraction of
//! OpenBLAS' single-thread DGEMM throughput; parallelism is added one level up, over row chunks,
//! which keeps every reduction deterministic (see `benches/` for the measured ratio).

use ndarray::{Array2, ArrayView2, ArrayViewMut2};

use crate::error::{Error, Result};

/// `C ← α·A·B + β·C` for ndarray views of any strides.
///
/// # Panics
/// Panics if the inner dimensions disagree (a programming error inside the crate, never a
/// consequence of user input: callers check shapes first).
pub fn gemm(alpha: f64, a: ArrayView2<f64>, b: ArrayView2<f64>, beta: f64, mut c: ArrayViewMut2<f64>) {
    let (m, k) = a.dim();
    let (k2, n) = b.dim();
    assert!(k == k2 && c.dim() == (m, n), "gemm: incompatible shapes");
    if m == 0 || n == 0 {
        return;
    }
    let sa = a.strides();
    let sb = b.strides();
    let sc = c.strides().to_vec();
    // SAFETY: the three views are valid for the given dims and strides (ndarray guarantees it),
    // `c` is uniquely borrowed and cannot alias `a` or `b`.
    unsafe {
        matrixmultiply::dgemm(m, k, n, alpha, a.as_ptr(), sa[0], sa[1], b.as_ptr(), sb[0], sb[1], beta, c.as_mut_ptr(), sc[0], sc[1]);
    }
}

/// `C ← A·B` in single precision for contiguous row-major buffers (`A` is `m × k`, `B` is
/// `k × n`, `C` is `m × n`). Used only to choose candidates whose values are then recomputed in
/// double precision (see `local::cand32`).
///
/// # Panics
/// Panics if a buffer is shorter than its shape requires (a programming error inside the crate).
pub fn sgemm_rows(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n, "sgemm_rows: buffers too short");
    if m == 0 || n == 0 {
        return;
    }
    // computed as `Cᵀ = Bᵀ·Aᵀ`, 6–10 % faster for the narrow `n` of candidate selection (the long
    // dimension `m` becomes the kernel's column panel); the candidates' error bound holds for any
    // summation order
    // SAFETY: the buffers hold at least the given row-major shapes (checked above), read through
    // transposed strides, and `c` is uniquely borrowed, so it cannot alias `a` or `b`.
    unsafe {
        matrixmultiply::sgemm(n, k, m, 1.0, b.as_ptr(), 1, n as isize, a.as_ptr(), 1, k as isize, 0.0, c.as_mut_ptr(), 1, n as isize);
    }
}

/// Lower Cholesky factor `L` with `A = L Lᵀ`. Fails with [`Error::NotPositiveDefinite`] (tagged
/// with `component` and `what`) if a pivot is not strictly positive or not finite.
pub fn cholesky(a: ArrayView2<f64>, component: usize, what: &str) -> Result<Array2<f64>> {
    let d = a.nrows();
    let mut l = vec![0.0f64; d * d];
    // row-major slices (no bounds checks in the inner products); the operation order is the
    // textbook one, so the factor is bit-identical to the indexed version it replaces
    for j in 0..d {
        let (_, rest) = l.split_at_mut(j * d);
        let (row_j, below) = rest.split_at_mut(d);
        let mut s = a[[j, j]];
        for &v in &row_j[..j] {
            s -= v * v;
        }
        if !(s > 0.0) || !s.is_finite() {
            return Err(Error::NotPositiveDefinite { component, what: what.into() });
        }
        let ljj = s.sqrt();
        row_j[j] = ljj;
        let lj = &row_j[..j];
        for (i, row_i) in (j + 1..d).zip(below.chunks_exact_mut(d)) {
            let mut t = a[[i, j]];
            for (x, y) in row_i[..j].iter().zip(lj) {
                t -= x * y;
            }
            row_i[j] = t / ljj;
        }
    }
    Ok(Array2::from_shape_vec((d, d), l).expect("d × d"))
}

/// `ln |A|` of a symmetric positive-definite matrix by Cholesky, without keeping the factor
/// (same arithmetic as [`cholesky`] followed by [`logdet_from_chol`]).
///
/// # Errors
/// [`Error::NotPositiveDefinite`] as [`cholesky`].
pub fn logdet_spd(a: ArrayView2<f64>, component: usize, what: &str) -> Result<f64> {
    let l = cholesky(a, component, what)?;
    Ok(logdet_from_chol(l.view()))
}

/// `ln |A| = 2 Σ ln L_dd` from a Cholesky factor.
pub fn logdet_from_chol(l: ArrayView2<f64>) -> f64 {
    2.0 * (0..l.nrows()).map(|d| l[[d, d]].ln()).sum::<f64>()
}

/// Inverse of a lower-triangular matrix (forward substitution column by column).
pub fn inv_lower(l: ArrayView2<f64>) -> Array2<f64> {
    let d = l.nrows();
    // column j of the inverse in a contiguous buffer; same operation order as the indexed
    // textbook loop, so the result is bit-identical to it
    let lc = l.as_standard_layout();
    let ls = lc.as_slice().expect("standard layout");
    let mut inv = Array2::<f64>::zeros((d, d));
    let mut col = vec![0.0f64; d];
    for j in 0..d {
        col[j] = 1.0 / ls[j * d + j];
        for i in j + 1..d {
            let mut s = 0.0;
            let row_i = &ls[i * d..i * d + d];
            for p in j..i {
                s -= row_i[p] * col[p];
            }
            col[i] = s / row_i[i];
        }
        for i in j..d {
            inv[[i, j]] = col[i];
        }
    }
    inv
}

/// `tr(A⁻¹ M)` given the Cholesky factor `L` of `A` (via `L⁻¹ M L⁻ᵀ`).
pub fn trace_inv_times(l_inv: ArrayView2<f64>, m: ArrayView2<f64>) -> f64 {
    // tr(A^{-1} M) = tr(L^{-T} L^{-1} M) = sum_ij (L^{-1})_{ki} M_ij (L^{-1})_{kj}
    let d = l_inv.nrows();
    let mut tmp = Array2::<f64>::zeros((d, d));
    gemm(1.0, l_inv, m, 0.0, tmp.view_mut());
    let mut s = 0.0;
    for k in 0..d {
        for j in 0..d {
            s += tmp[[k, j]] * l_inv[[k, j]];
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn sgemm_rows_is_the_row_major_product() {
        for &(m, k, n) in &[(1usize, 1usize, 1usize), (3, 5, 2), (17, 33, 9), (40, 7, 65)] {
            let a: Vec<f32> = (0..m * k).map(|i| ((i * 37) % 23) as f32 / 7.0 - 1.5).collect();
            let b: Vec<f32> = (0..k * n).map(|i| ((i * 53) % 29) as f32 / 5.0 - 2.5).collect();
            let mut c = vec![f32::NAN; m * n];
            sgemm_rows(m, k, n, &a, &b, &mut c);
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k).map(|p| a[i * k + p] as f64 * b[p * n + j] as f64).sum();
                    let tol = 1e-5 * (0..k).map(|p| (a[i * k + p] as f64 * b[p * n + j] as f64).abs()).sum::<f64>() + 1e-30;
                    assert!((c[i * n + j] as f64 - want).abs() <= tol, "({m},{k},{n}) at ({i},{j})");
                }
            }
        }
    }

    #[test]
    fn cholesky_and_inverse() {
        let a = array![[4.0, 2.0, 0.6], [2.0, 2.0, 0.5], [0.6, 0.5, 3.0]];
        let l = cholesky(a.view(), 0, "test").unwrap();
        let mut back = Array2::zeros((3, 3));
        gemm(1.0, l.view(), l.t(), 0.0, back.view_mut());
        for (x, y) in back.iter().zip(a.iter()) {
            assert!((x - y).abs() < 1e-12);
        }
        let li = inv_lower(l.view());
        let mut eye = Array2::zeros((3, 3));
        gemm(1.0, li.view(), l.view(), 0.0, eye.view_mut());
        for i in 0..3 {
            for j in 0..3 {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((eye[[i, j]] - want).abs() < 1e-12);
            }
        }
        // tr(A^{-1} A) = D
        assert!((trace_inv_times(li.view(), a.view()) - 3.0).abs() < 1e-12);
    }

    #[test]
    fn cholesky_rejects_indefinite() {
        let a = array![[1.0, 2.0], [2.0, 1.0]];
        assert!(matches!(cholesky(a.view(), 7, "B"), Err(Error::NotPositiveDefinite { component: 7, .. })));
    }
}
