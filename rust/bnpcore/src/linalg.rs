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

/// `f::<R>(blk)` for the block's row count `R = n` (1 to 8; larger counts take 8, smaller 1):
/// the kernels below keep one accumulator row per block row in registers, so `R` is a constant.
#[cfg(target_arch = "x86_64")]
macro_rules! rows_1_to_8 {
    ($n:expr, $f:ident, $blk:expr) => {
        match $n {
            8.. => $f::<8>($blk),
            7 => $f::<7>($blk),
            6 => $f::<6>($blk),
            5 => $f::<5>($blk),
            4 => $f::<4>($blk),
            3 => $f::<3>($blk),
            2 => $f::<2>($blk),
            _ => $f::<1>($blk),
        }
    };
}

/// Lane masks of two `lanes`-wide registers covering the first `cols ≤ 2·lanes` columns of a
/// row (the kernels' last, partial block of columns).
#[cfg(target_arch = "x86_64")]
fn two_register_masks(cols: usize, lanes: usize) -> (u32, u32) {
    let first = |n: usize| ((1u64 << n) - 1) as u32;
    (first(cols.min(lanes)), first(cols.saturating_sub(lanes).min(lanes)))
}

/// Columns per panel of a [`TableF32`] packed for the AVX-512 kernel (two 16-lane registers).
const PANEL: usize = 32;
/// Rows of `A` per call of the AVX-512 kernel (two accumulators per row: 16 registers).
const PANEL_MR: usize = 8;
/// Inner-dimension block: one panel's block (`PANEL_KC × PANEL` `f32`, 32 KiB) stays in L1
/// while every row of the left operand passes over it.
const PANEL_KC: usize = 256;

/// The right operand `B` (`f × k`) of repeated single-precision products `C = A·B` with many
/// row blocks `A`: kept row-major for [`sgemm_rows`], or, where the CPU has AVX-512, packed once
/// into panels of 32 columns (`[panel][p][32]`, zero-padded) that [`TableF32::gemm_rows`] reads
/// with an own kernel. That kernel reads `A`'s rows where they are (broadcasting one entry of
/// each of 8 rows against two registers of a panel) instead of copying both operands into
/// packed buffers on every call, as a general GEMM must: for the candidates' narrow products
/// (`k` of 60 to 400 clusters, 128 rows of 2,080 features per call) that copying was a third of
/// the GEMM's time. Every entry of `C` is one sum of `f` products in some order, which is all
/// the candidates' error bound assumes (see `local::cand32`).
pub struct TableF32 {
    f: usize,
    k: usize,
    /// row-major `f × k` (no AVX-512) or the panels (AVX-512), never both
    rm: Vec<f32>,
    panels: Vec<f32>,
}

impl TableF32 {
    /// The table `b` (`f × k`, row-major), packed where the CPU runs the panel kernel.
    ///
    /// # Panics
    /// Panics if `b.len() != f · k` (a programming error inside the crate).
    pub fn new(f: usize, k: usize, b: Vec<f32>) -> TableF32 {
        TableF32::with_panels(f, k, b, avx512_available())
    }

    /// [`TableF32::new`] with the layout chosen by the caller (`panels` only where the CPU has
    /// AVX-512; the tests run both layouts).
    fn with_panels(f: usize, k: usize, b: Vec<f32>, panels: bool) -> TableF32 {
        assert_eq!(b.len(), f * k, "TableF32: buffer size");
        if !panels {
            return TableF32 { f, k, rm: b, panels: Vec::new() };
        }
        let np = k.div_ceil(PANEL);
        let mut panels = vec![0.0f32; np * f * PANEL];
        for j in 0..np {
            let (c0, c1) = (j * PANEL, ((j + 1) * PANEL).min(k));
            let pan = &mut panels[j * f * PANEL..(j + 1) * f * PANEL];
            for p in 0..f {
                pan[p * PANEL..p * PANEL + (c1 - c0)].copy_from_slice(&b[p * k + c0..p * k + c1]);
            }
        }
        TableF32 { f, k, rm: Vec::new(), panels }
    }

    /// `C ← A·B` for `A` (`m × f`) and `C` (`m × k`), contiguous row-major.
    ///
    /// # Panics
    /// Panics if a buffer is shorter than its shape requires (a programming error inside the crate).
    pub fn gemm_rows(&self, m: usize, a: &[f32], c: &mut [f32]) {
        let (f, k) = (self.f, self.k);
        if self.panels.is_empty() {
            sgemm_rows(m, f, k, a, &self.rm, c);
            return;
        }
        assert!(a.len() >= m * f && c.len() >= m * k, "TableF32::gemm_rows: buffers too short");
        if m == 0 || k == 0 {
            return;
        }
        if f == 0 {
            c[..m * k].iter_mut().for_each(|v| *v = 0.0);
            return;
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the panels exist only where `avx512_available()` (AVX-512F) held when
        // they were built, and the buffers hold the shapes checked above.
        unsafe {
            panels_gemm_avx512(m, f, k, a, &self.panels, c)
        }
    }
}

/// Whether this CPU has AVX-512F (and so runs [`TableF32`]'s panel kernel, [`gram_upper`]'s
/// kernel and the crate's other 512-bit paths).
pub fn avx512_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `C = A·B` with `B` in panels: blocks of [`PANEL_KC`] of the inner dimension, in each every
/// panel against every row block (the partial sums carried in `C`, which is exact in `f32`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn panels_gemm_avx512(m: usize, f: usize, k: usize, a: &[f32], panels: &[f32], c: &mut [f32]) {
    let np = k.div_ceil(PANEL);
    for p0 in (0..f).step_by(PANEL_KC) {
        let p1 = (p0 + PANEL_KC).min(f);
        for j in 0..np {
            let cols = (k - j * PANEL).min(PANEL);
            let pan = &panels[j * f * PANEL + p0 * PANEL..j * f * PANEL + p1 * PANEL];
            let mut r0 = 0;
            while r0 < m {
                let nr = (m - r0).min(PANEL_MR);
                let blk = PanelBlock { a: &a[r0 * f..], f, p0, p1, pan, c: &mut c[r0 * k + j * PANEL..], k, cols };
                // SAFETY: as for the caller (AVX-512F), and `PanelBlock`'s slices start at the
                // block's first row and column with `nr` rows of `a` and of `c` behind them.
                unsafe { rows_1_to_8!(nr, panel_block, blk) }
                r0 += nr;
            }
        }
    }
}

/// One row block against one panel's block `p0..p1` of the inner dimension.
#[cfg(target_arch = "x86_64")]
struct PanelBlock<'a> {
    /// the block's first row of `A` (row stride `f`)
    a: &'a [f32],
    f: usize,
    p0: usize,
    p1: usize,
    /// the panel's rows `p0..p1` (`PANEL` entries each)
    pan: &'a [f32],
    /// the block's first entry of `C` (row stride `k`), `cols ≤ PANEL` columns written
    c: &'a mut [f32],
    k: usize,
    cols: usize,
}

/// `C[r, ..cols] (+)= Σ_{p0 ≤ p < p1} A[r, p] · panel[p, ..cols]` for the `R` rows of the block,
/// one fused multiply-add chain per entry (continuing the sum stored in `C` unless `p0 = 0`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn panel_block<const R: usize>(b: PanelBlock<'_>) {
    use std::arch::x86_64::*;
    let PanelBlock { a, f, p0, p1, pan, c, k, cols } = b;
    assert!(a.len() >= (R - 1) * f + p1 && pan.len() >= (p1 - p0) * PANEL && c.len() >= (R - 1) * k + cols);
    let (m0, m1) = two_register_masks(cols, 16);
    let (m0, m1) = (m0 as __mmask16, m1 as __mmask16);
    let cp = c.as_mut_ptr();
    let ap = a.as_ptr();
    let tp = pan.as_ptr();
    // SAFETY (for every access below): row `r < R` of `a` is read at `r·f + p` with
    // `p < p1 ≤ f`, the panel at `(p − p0)·PANEL + 0..32`, and `c` at `r·k + 0..cols` through
    // masks (masked-off lanes are neither read nor written; their addresses, possibly past the
    // end when `cols ≤ 16`, are formed with `wrapping_add`), all inside the lengths asserted above.
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    if p0 > 0 {
        for (r, ar) in acc.iter_mut().enumerate() {
            ar[0] = unsafe { _mm512_maskz_loadu_ps(m0, cp.add(r * k)) };
            ar[1] = unsafe { _mm512_maskz_loadu_ps(m1, cp.wrapping_add(r * k + 16)) };
        }
    }
    for p in p0..p1 {
        let t = unsafe { tp.add((p - p0) * PANEL) };
        let (t0, t1) = unsafe { (_mm512_loadu_ps(t), _mm512_loadu_ps(t.add(16))) };
        for (r, ar) in acc.iter_mut().enumerate() {
            let v = _mm512_set1_ps(unsafe { *ap.add(r * f + p) });
            ar[0] = _mm512_fmadd_ps(v, t0, ar[0]);
            ar[1] = _mm512_fmadd_ps(v, t1, ar[1]);
        }
    }
    for (r, ar) in acc.iter().enumerate() {
        unsafe {
            _mm512_mask_storeu_ps(cp.add(r * k), m0, ar[0]);
            _mm512_mask_storeu_ps(cp.wrapping_add(r * k + 16), m1, ar[1]);
        }
    }
}

/// Rows of `Z` summed per block of [`gram_upper`] (`matrixmultiply`'s `f64` inner block).
const GRAM_KC: usize = 256;

/// The upper triangle (`b ≥ a`, and some entries below it) of `G = Zᵀ·Y` for `Z`, `Y`
/// (`n × d`, contiguous row-major) into `g` (`d × d`, row-major): the same bits as
/// [`gemm`]`(1, Zᵀ, Y, 0, G)` in those entries, in 62.5 % of its multiply-adds at `d = 64` and
/// without its packing copies where the CPU has AVX-512 (own kernel: one fused multiply-add chain
/// per entry over blocks of 256 rows, the blocks' sums added in order, which is what
/// `matrixmultiply`'s AVX-512 kernel computes); otherwise [`gemm`] itself. Entries below the
/// diagonal are unspecified.
///
/// # Panics
/// Panics if a buffer is shorter than its shape requires (a programming error inside the crate).
pub fn gram_upper(n: usize, d: usize, z: &[f64], y: &[f64], g: &mut [f64]) {
    assert!(z.len() >= n * d && y.len() >= n * d && g.len() >= d * d, "gram_upper: buffers too short");
    if d == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if n > 0 && avx512_available() {
        // SAFETY: AVX-512F is present (checked) and the buffers hold the shapes checked above.
        unsafe { gram_upper_avx512(n, d, z, y, g) };
        return;
    }
    let zv = ArrayView2::from_shape((n, d), &z[..n * d]).expect("shape checked");
    let yv = ArrayView2::from_shape((n, d), &y[..n * d]).expect("shape checked");
    let gv = ArrayViewMut2::from_shape((d, d), &mut g[..d * d]).expect("shape checked");
    gemm(1.0, zv.t(), yv, 0.0, gv);
}

/// [`gram_upper`]'s kernel: blocks of 8 rows `a` of `G` × 16 columns `b ≥` the block's first row.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn gram_upper_avx512(n: usize, d: usize, z: &[f64], y: &[f64], g: &mut [f64]) {
    for i0 in (0..n).step_by(GRAM_KC) {
        let i1 = (i0 + GRAM_KC).min(n);
        for a0 in (0..d).step_by(8) {
            for b0 in (a0..d).step_by(16) {
                let blk = GramBlock { z, y, g: &mut *g, d, i0, i1, a0, b0 };
                // SAFETY: as for the caller (AVX-512F, shapes checked by `gram_upper`).
                unsafe { rows_1_to_8!((d - a0).min(8), gram_block, blk) }
            }
        }
    }
}

/// One block of [`gram_upper_avx512`]: rows `a0..a0 + R`, columns `b0..min(b0 + 16, d)` of `G`,
/// summed over rows `i0..i1` of `Z` and `Y`.
#[cfg(target_arch = "x86_64")]
struct GramBlock<'a> {
    z: &'a [f64],
    y: &'a [f64],
    g: &'a mut [f64],
    d: usize,
    i0: usize,
    i1: usize,
    a0: usize,
    b0: usize,
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn gram_block<const R: usize>(b: GramBlock<'_>) {
    use std::arch::x86_64::*;
    let GramBlock { z, y, g, d, i0, i1, a0, b0 } = b;
    assert!(a0 + R <= d && b0 < d && i1 * d <= z.len() && i1 * d <= y.len() && d * d <= g.len());
    let cols = (d - b0).min(16);
    let (m0, m1) = two_register_masks(cols, 8);
    let (m0, m1) = (m0 as __mmask8, m1 as __mmask8);
    let (zp, yp, gp) = (z.as_ptr(), y.as_ptr(), g.as_mut_ptr());
    // SAFETY (every access below): `z` at `i·d + a0 + r` with `i < i1`, `r < R`, `a0 + R ≤ d`;
    // `y` and `g` at `i·d + b0 + 0..16` (`g`: `(a0 + r)·d + …`) through masks limited to the
    // `cols ≤ d − b0` columns that exist (masked-off lanes are neither read nor written, and
    // their addresses are formed with `wrapping_add`), all inside the lengths asserted above.
    let mut acc = [[_mm512_setzero_pd(); 2]; R];
    for i in i0..i1 {
        let yr = yp.wrapping_add(i * d + b0);
        let (y0, y1) = unsafe { (_mm512_maskz_loadu_pd(m0, yr), _mm512_maskz_loadu_pd(m1, yr.wrapping_add(8))) };
        for (r, ar) in acc.iter_mut().enumerate() {
            let v = _mm512_set1_pd(unsafe { *zp.add(i * d + a0 + r) });
            ar[0] = _mm512_fmadd_pd(v, y0, ar[0]);
            ar[1] = _mm512_fmadd_pd(v, y1, ar[1]);
        }
    }
    for (r, ar) in acc.iter().enumerate() {
        let o = gp.wrapping_add((a0 + r) * d + b0);
        unsafe {
            if i0 == 0 {
                _mm512_mask_storeu_pd(o, m0, ar[0]);
                _mm512_mask_storeu_pd(o.wrapping_add(8), m1, ar[1]);
            } else {
                let s0 = _mm512_add_pd(_mm512_maskz_loadu_pd(m0, o), ar[0]);
                let s1 = _mm512_add_pd(_mm512_maskz_loadu_pd(m1, o.wrapping_add(8)), ar[1]);
                _mm512_mask_storeu_pd(o, m0, s0);
                _mm512_mask_storeu_pd(o.wrapping_add(8), m1, s1);
            }
        }
    }
}

/// Lower Cholesky factor `L` with `A = L Lᵀ`. Fails with [`Error::NotPositiveDefinite`] (tagged
/// with `component` and `what`) if a pivot is not strictly positive or not finite.
///
/// Right-looking ([`cholesky_lower_in_place`] on a copy of the lower triangle): after column `j`
/// is final, its outer product is subtracted from the rows below, a contiguous row segment at a
/// time (vectorised, 512-bit or 256-bit where the CPU has AVX-512 or AVX2).
/// Every entry receives the same subtractions in the same order as in the textbook
/// (left-looking) loop, `a_ij − l_i0 l_j0 − l_i1 l_j1 − …`, so the factor is bit-identical to it.
pub fn cholesky(a: ArrayView2<f64>, component: usize, what: &str) -> Result<Array2<f64>> {
    let d = a.nrows();
    // the lower triangle of `a`, overwritten by `L` column by column
    let mut l = vec![0.0f64; d * d];
    for i in 0..d {
        for j in 0..=i {
            l[i * d + j] = a[[i, j]];
        }
    }
    let mut col = vec![0.0f64; d];
    cholesky_lower_in_place(&mut l, d, &mut col, component, what)?;
    Ok(Array2::from_shape_vec((d, d), l).expect("d × d"))
}

/// [`cholesky`] in place: `l` (`d × d`, row-major) holds the lower triangle of `A` on entry and
/// `L` on return (its strict upper triangle is neither read nor written); `col` is scratch of
/// `d` entries. The same arithmetic as [`cholesky`], for callers that factor many matrices
/// into reused buffers.
///
/// # Errors
/// [`Error::NotPositiveDefinite`] as [`cholesky`].
///
/// # Panics
/// Panics if `l` has fewer than `d²` or `col` fewer than `d` entries.
pub fn cholesky_lower_in_place(l: &mut [f64], d: usize, col: &mut [f64], component: usize, what: &str) -> Result<()> {
    assert!(l.len() >= d * d && col.len() >= d, "cholesky_lower_in_place: buffers too short");
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            return unsafe { cholesky_lower_avx512(l, d, col, component, what) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { cholesky_lower_avx2(l, d, col, component, what) };
        }
    }
    cholesky_lower_impl(l, d, col, component, what)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,avx512f")]
unsafe fn cholesky_lower_avx512(l: &mut [f64], d: usize, col: &mut [f64], component: usize, what: &str) -> Result<()> {
    cholesky_lower_impl(l, d, col, component, what)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn cholesky_lower_avx2(l: &mut [f64], d: usize, col: &mut [f64], component: usize, what: &str) -> Result<()> {
    cholesky_lower_impl(l, d, col, component, what)
}

#[inline(always)]
fn cholesky_lower_impl(l: &mut [f64], d: usize, col: &mut [f64], component: usize, what: &str) -> Result<()> {
    for j in 0..d {
        let s = l[j * d + j];
        if !(s > 0.0) || !s.is_finite() {
            return Err(Error::NotPositiveDefinite { component, what: what.into() });
        }
        let ljj = s.sqrt();
        l[j * d + j] = ljj;
        for i in j + 1..d {
            let v = l[i * d + j] / ljj;
            l[i * d + j] = v;
            col[i] = v;
        }
        for i in j + 1..d {
            let lij = col[i];
            let row = &mut l[i * d + j + 1..i * d + i + 1];
            for (x, &c) in row.iter_mut().zip(&col[j + 1..=i]) {
                *x -= lij * c;
            }
        }
    }
    Ok(())
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

/// Inverse of a lower-triangular matrix (forward substitution). Row `i` of the inverse is
/// `(e_i − Σ_{p<i} l_ip X_p) / l_ii`, accumulated a contiguous row segment at a time
/// (vectorisable, 256-bit where the CPU has AVX2); every entry receives the same subtractions in
/// the same order as in the column-by-column textbook loop, so the result is bit-identical to it.
pub fn inv_lower(l: ArrayView2<f64>) -> Array2<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { inv_lower_avx2(l) };
        }
    }
    inv_lower_impl(l)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn inv_lower_avx2(l: ArrayView2<f64>) -> Array2<f64> {
    inv_lower_impl(l)
}

#[inline(always)]
fn inv_lower_impl(l: ArrayView2<f64>) -> Array2<f64> {
    let d = l.nrows();
    let lc = l.as_standard_layout();
    let ls = lc.as_slice().expect("standard layout");
    let mut x = vec![0.0f64; d * d];
    let mut acc = vec![0.0f64; d];
    for i in 0..d {
        let row_l = &ls[i * d..i * d + d];
        acc[..i].iter_mut().for_each(|v| *v = 0.0);
        for p in 0..i {
            let lip = row_l[p];
            for (v, &xp) in acc[..=p].iter_mut().zip(&x[p * d..p * d + p + 1]) {
                *v -= lip * xp;
            }
        }
        let lii = row_l[i];
        let out = &mut x[i * d..i * d + d];
        for (o, &v) in out[..i].iter_mut().zip(&acc[..i]) {
            *o = v / lii;
        }
        out[i] = 1.0 / lii;
    }
    Array2::from_shape_vec((d, d), x).expect("d × d")
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

    /// The packed table's product against a float64 reference, within the error of any order of
    /// summation (`γ_f Σ|a b|`), for shapes around the kernel's blocks (8 rows, 16/32 columns,
    /// 256 inner entries), and no entry written outside `C`.
    #[test]
    fn table_f32_product_within_the_summation_bound() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
        };
        let ks = [1usize, 5, 16, 17, 31, 32, 33, 64, 89];
        let fs = [1usize, 7, 255, 256, 257, 600];
        let ms = [1usize, 3, 8, 9, 17];
        for (i, &k) in ks.iter().enumerate() {
            for (j, &f) in fs.iter().enumerate() {
                let m = ms[(i + j) % ms.len()];
                let a: Vec<f32> = (0..m * f).map(|_| next()).collect();
                let b: Vec<f32> = (0..f * k).map(|_| next()).collect();
                // both layouts (the panels only where this CPU runs their kernel)
                for packed in [false, avx512_available()] {
                    let t = TableF32::with_panels(f, k, b.clone(), packed);
                    let guard = 40;
                    let mut c = vec![f32::NAN; m * k + guard];
                    t.gemm_rows(m, &a, &mut c[..m * k]);
                    assert!(c[m * k..].iter().all(|v| v.is_nan()), "written past C ({m},{f},{k})");
                    let u = 1.0 / (1u64 << 24) as f64;
                    let gam = f as f64 * u / (1.0 - f as f64 * u);
                    for r in 0..m {
                        for q in 0..k {
                            let terms = (0..f).map(|p| a[r * f + p] as f64 * b[p * k + q] as f64);
                            let want: f64 = terms.clone().sum();
                            let abs: f64 = terms.map(f64::abs).sum();
                            let err = (c[r * k + q] as f64 - want).abs();
                            assert!(err <= gam * abs * 1.001 + 1e-30, "({m},{f},{k}, packed {packed}) at ({r},{q}): {err} > {}", gam * abs);
                        }
                    }
                }
            }
        }
    }

    /// `gram_upper` gives `gemm`'s bits on and above the diagonal, for widths around the kernel's
    /// blocks and row counts around its 256-row inner block.
    #[test]
    fn gram_upper_is_gemm_bit_for_bit() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64 * 6.0 - 3.0
        };
        for &(n, d) in &[(1usize, 1usize), (3, 5), (7, 8), (9, 9), (40, 16), (33, 17), (256, 24), (257, 64), (600, 36), (513, 70)] {
            let y: Vec<f64> = (0..n * d).map(|_| next()).collect();
            let c: Vec<f64> = (0..n).map(|_| next().abs()).collect();
            let z: Vec<f64> = (0..n * d).map(|q| c[q / d] * y[q]).collect();
            let mut g = vec![f64::NAN; d * d + 9];
            gram_upper(n, d, &z, &y, &mut g[..d * d]);
            assert!(g[d * d..].iter().all(|v| v.is_nan()), "written past G ({n},{d})");
            let mut want = Array2::<f64>::zeros((d, d));
            let zv = ArrayView2::from_shape((n, d), &z[..]).unwrap();
            let yv = ArrayView2::from_shape((n, d), &y[..]).unwrap();
            gemm(1.0, zv.t(), yv, 0.0, want.view_mut());
            for a in 0..d {
                for b in a..d {
                    assert_eq!(g[a * d + b].to_bits(), want[[a, b]].to_bits(), "({n},{d}) at ({a},{b})");
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

    /// The textbook loops the factor and the inverse used before (references for bit-identity).
    fn cholesky_textbook(a: &Array2<f64>) -> Option<Array2<f64>> {
        let d = a.nrows();
        let mut l = Array2::<f64>::zeros((d, d));
        for j in 0..d {
            let mut s = a[[j, j]];
            for p in 0..j {
                s -= l[[j, p]] * l[[j, p]];
            }
            if !(s > 0.0) || !s.is_finite() {
                return None;
            }
            l[[j, j]] = s.sqrt();
            for i in j + 1..d {
                let mut t = a[[i, j]];
                for p in 0..j {
                    t -= l[[i, p]] * l[[j, p]];
                }
                l[[i, j]] = t / l[[j, j]];
            }
        }
        Some(l)
    }

    fn inv_lower_textbook(l: &Array2<f64>) -> Array2<f64> {
        let d = l.nrows();
        let mut inv = Array2::<f64>::zeros((d, d));
        for j in 0..d {
            inv[[j, j]] = 1.0 / l[[j, j]];
            for i in j + 1..d {
                let mut s = 0.0;
                for p in j..i {
                    s -= l[[i, p]] * inv[[p, j]];
                }
                inv[[i, j]] = s / l[[i, i]];
            }
        }
        inv
    }

    #[test]
    fn factor_and_inverse_are_the_textbook_loops_bit_for_bit() {
        let mut seed = 9u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 11) as f64) / ((1u64 << 53) as f64) - 0.5
        };
        for d in (1..=20).chain([31, 64, 70]) {
            for scale in [1e-3, 1.0, 1e4] {
                let g = Array2::from_shape_fn((d, d + 3), |_| next() * scale);
                let a = g.dot(&g.t()) + Array2::<f64>::eye(d) * 1e-6 * scale * scale;
                let bits = |m: &Array2<f64>| m.iter().map(|v| v.to_bits()).collect::<Vec<u64>>();
                let want = cholesky_textbook(&a).expect("positive definite");
                let got = cholesky(a.view(), 0, "test").unwrap();
                assert_eq!(bits(&got), bits(&want), "d={d}");
                assert_eq!(bits(&inv_lower(got.view())), bits(&inv_lower_textbook(&want)), "d={d}");
                // the portable build of the factor's loop (the dispatch takes a vector build here)
                let mut l_impl: Vec<f64> = (0..d * d).map(|q| if q % d <= q / d { a[[q / d, q % d]] } else { 0.0 }).collect();
                cholesky_lower_impl(&mut l_impl, d, &mut vec![0.0; d], 0, "test").unwrap();
                assert_eq!(bits(&Array2::from_shape_vec((d, d), l_impl).unwrap()), bits(&want), "d={d}");
                assert_eq!(bits(&inv_lower_impl(got.view())), bits(&inv_lower_textbook(&want)), "d={d}");
                // a non-contiguous input (the transpose of the lower triangle's mirror)
                let at = a.t().to_owned();
                assert_eq!(bits(&cholesky(at.t(), 0, "test").unwrap()), bits(&want), "d={d}");
            }
            // the first failing pivot is reported, as by the textbook loop
            let mut bad = Array2::<f64>::eye(d);
            bad[[d - 1, d - 1]] = -1.0;
            assert!(cholesky_textbook(&bad).is_none());
            assert!(matches!(cholesky(bad.view(), 3, "B"), Err(Error::NotPositiveDefinite { component: 3, .. })));
        }
    }

    #[test]
    fn cholesky_rejects_indefinite() {
        let a = array![[1.0, 2.0], [2.0, 1.0]];
        assert!(matches!(cholesky(a.view(), 7, "B"), Err(Error::NotPositiveDefinite { component: 7, .. })));
    }
}
