//! Candidate clusters of L-sparse rows from a single-precision GEMM, with exact selection
//! (issue 5: L-sparse speed at large `K`).
//!
//! With `top_l = L ≪ K` the cost of a sparse local step is the log-weight GEMM
//! `W = φ(X)·T + c` (`rows × F × K`) that chooses the `L` clusters of every row. For the
//! zero-mean Gaussian (`φ(x) = vech(x xᵀ)`, `F = D(D+1)/2`) this module evaluates it in `f32`
//! (about twice the GEMM throughput), keeps for every row each cluster whose `f32` value cannot
//! be ruled out of the top `L` by a *rigorous* error bound, and recomputes the log weights of
//! these candidates in `f64` from the raw table, `(Σ_{i≤j} x_i x_j T_k[p(i,j)] + cst_k) + E[ln π_k]`.
//! The local step then selects the top `L` among the candidates exactly as it does on a full row,
//! so the selected set and values are those of the `f64` top `L`; the `f64` values differ from
//! the dense GEMM's only by the order of the summation (the same `f64` rounding, see below).
//!
//! **Conditioning.** In the raw `vech` basis the terms `x_i x_j T_k[p(i,j)]` of 8×8 image patches
//! cancel massively: `Σ|φ_i T_i|` reaches 10¹² for log weights of ~50 nats, so an `f32`
//! evaluation is off by up to millions of nats (and `f64` evaluations, the dense GEMM included,
//! by up to ~1e-4 nats). The `f32` table is therefore evaluated in a whitened basis: with
//! `M = −mean_k A_k` (the clusters' quadratic forms `q_k(x) = xᵀA_k x = φ(x)·T_k`) and its
//! Cholesky factor `M = R Rᵀ`, `ỹ = Rᵀx` and `Ã_k = H A_k Hᵀ` (`H = R⁻¹`) give
//! `q_k(x) = ỹᵀÃ_kỹ` with `Ã_k ≈ −I` on average, and the bound below becomes tight enough that
//! ~4.04 candidates per row survive at `K = 800`, `L = 4` on image patches. The basis only
//! affects how many candidates survive, never which clusters are selected.
//!
//! **Error bound** `e_nk ≥ |v_nk − ŵ_nk|` (`v` the `f32`-based value, `ŵ` the `f64` value the
//! local step uses). With `u = 2⁻²⁴`, `u₆₄ = 2⁻⁵³`, `γ_m = m u/(1 − m u)` (`γ⁶⁴_m` with `u₆₄`),
//! Euclidean norms, `T_k` the raw table column and `T̃_k = vech'(Ã_k)`:
//!
//! * the `f32` GEMM, any summation order, with or without FMA: `γ_F Σ_i|φ̂_i T̂_i|`; the
//!   rounding of its inputs — the features `fl32(fl32(ỹ_i 2⁻ᵉ)·fl32(ỹ_j 2⁻ᵉ))`, relative error
//!   `u_φ = (1+u)³ − 1`, and the table `fl32(T̃ 2⁻ᵉᵏ)`, `u`; entries flushed to 0 below `2⁻⁴⁰`
//!   (whitened row entries `ỹ_i 2⁻ᵉ`: products of two kept ones are normal `f32` numbers, a
//!   feature with a flushed factor is below `2⁻⁴⁰`) and `2⁻⁶⁰` (table) of their row's (column's)
//!   largest; subnormal products and partial sums in the GEMM (absolute
//!   error `≤ 2⁻¹⁵⁰` each, `2F` of them). Powers of two scale every row and column to a largest
//!   entry in `[0.5, 1)`, so nothing overflows and `‖φ̂‖‖T̂‖ ≥ 1/8` in scaled units. By
//!   Cauchy–Schwarz all of it is `≤ c₃₂ ‖φ(ỹ_n)‖ ‖T̃_k‖` with
//!   `c₃₂ = (γ_F(1+u_φ)(1+u) + u_φ(1+u) + u + √F(4·2⁻⁴⁰(1+u) + 2·2⁻⁶⁰) + 32F·2⁻¹⁵⁰)(1 + 2⁻²⁰)`;
//!   `‖φ(ỹ)‖² = ((Σỹ_i²)² + Σỹ_i⁴)/2` costs `O(D)`.
//! * the `f64` whitening: `ỹ = fl(Rᵀx)` is off by `‖δ‖ ≤ γ⁶⁴_D ‖R‖_F ‖x‖`; `Ã_k = fl(fl(H A_k) Hᵀ)`
//!   by `‖E_k‖_F ≤ γ⁶⁴_{2D} ‖H‖²_F ‖T_k‖`; `HᵀRᵀ = I + Δ` with `‖Δ‖₂ ≤ ρ`, `ρ` from a
//!   compensated (error-free) residual plus its `γ²` bound. These give
//!   `(2ρ + ρ²)‖T_k‖‖x‖² + ‖E_k‖_F‖ỹ‖² + (2‖δ‖(‖ỹ‖+‖δ‖) + ‖δ‖²)(‖T̃_k‖ + ‖E_k‖_F)`.
//! * the `f64` recomputation (each term `x_i x_j T_k[p(i,j)]` passes through at most
//!   `⌈D/8⌉ + D + 3` roundings in `quad_vech4`'s order of fused operations, two more adding the
//!   constants, `≤ 2D + 5` in all):
//!   `γ⁶⁴_{2D+5}(‖x‖²‖T_k‖ + |cst_k| + |E[ln π_k]|)`, and the additions forming `v`:
//!   `2⁻⁴⁸(|v| + |cst_k| + |E[ln π_k]|)`.
//!
//! All terms are products of a row factor and a cluster factor, so `e_nk` costs a few flops.
//! A cluster is a candidate iff `v_nk + e_nk ≥ λ_n`, the `L`-th largest of the lower bounds
//! `v_nj − e_nj`: a member `k` of the exact top `L` has `v_nk + e_nk ≥ ŵ_nk ≥ ŵ_(L) ≥ λ_n`
//! (lower bounds are below the values, so their `L`-th largest is below `ŵ`'s), hence the
//! candidates contain the exact top `L`, and selecting among them under the same order gives
//! the same set. Rows whose features overflow get every cluster as a candidate (the exact
//! path); clusters with `E[ln π] = −∞` are never candidates (their `f64` value is `−∞`, which is
//! also what non-candidates hold in the local step's row).

use ndarray::{Array2, ArrayView2};
use rayon::prelude::*;

use crate::linalg::{cholesky, gemm, inv_lower, TableF32};
use crate::obs::{FeatureMap, LogLikTable};

// When the path is used (measured single-threaded against the f64 sparse path on image
// patches, D = 9…64, K = 16…800; `top_l` steps on 8192 rows): it pays from `F·K ≈ 3·10⁴` up
// (D = 64: 1.5× at K = 800), while each candidate's f64 recomputation costs several times its
// share of the GEMM, so `L` must stay small against `K`. With the fused 8-lane recomputation
// (`quad_vech4`, AVX-512 where present), scratch grid of session 17, speed-up over the f64 path:
// D = 64, K = 64: 1.13/1.03/0.96× at L = 1/4/8; K = 128: 1.21/1.03/0.91× at L = 4/16/32;
// K = 256: 1.26/1.13/1.06× at L = 4/16/32; D = 36, K = 64: 1.03× at L = 4, K = 128: 1.02× at
// L = 16; D = 16, K = 256: 1.11× at L = 16 — at least 1.03× wherever `L ≤ K/16`.

/// Smallest `K` for which the single-precision candidate path is used.
pub const MIN_CLUSTERS: usize = 64;
/// Smallest GEMM width `F·K` for which the path is used.
pub const MIN_GEMM_WIDTH: usize = 32_768;
/// The path is used only if `L ≤ K / MIN_K_OVER_L`.
pub const MIN_K_OVER_L: usize = 16;
/// The path is used only for batches of at least `MIN_ROWS_PER_DIM · D` rows: preparing the
/// whitened table costs `4D³` flops per cluster, the `f64` GEMM time saved on `≈ 20 D` rows.
pub const MIN_ROWS_PER_DIM: usize = 64;

const U32: f64 = 1.0 / (1u64 << 24) as f64;
const U64: f64 = f64::EPSILON / 2.0;
/// Table entries below `TAU` times their column's largest are flushed to zero.
const TAU: f64 = 1.0 / (1u64 << 60) as f64;
/// Whitened row entries below `TAU_Y` times their row's largest are flushed to zero (so every
/// product of two kept entries is a normal `f32` number).
const TAU_Y: f64 = 1.0 / (1u64 << 40) as f64;
/// Relative slack covering the rounding of the bound's own evaluation.
const FUDGE: f64 = 1.0 + 1.0 / (1u64 << 20) as f64;
/// Relative slack of the `f64` additions of the constants.
const ADD_SLACK: f64 = 1.0 / (1u64 << 48) as f64;
/// Largest binary exponent of a row or column scale (keeps every product of scales finite).
const MAX_EXP: i32 = 400;

fn gamma(m: usize, u: f64) -> f64 {
    let mu = m as f64 * u;
    mu / (1.0 - mu)
}

/// Binary exponent `e` with `m · 2⁻ᵉ ∈ [0.5, 1)` for a finite `m > 0`.
fn exponent(m: f64) -> i32 {
    libm::frexp(m).1
}

/// `2ᵉ` for `|e| ≤ 1000`.
fn pow2(e: i32) -> f64 {
    libm::scalbn(1.0, e)
}

/// Raw zero-mean `vech'` table: `q_k(x) = Σ_{i≤j} x_i x_j T[p(i,j), k]`.
fn zero_mean_vech(table: &LogLikTable) -> Option<(usize, &Array2<f64>, &ndarray::Array1<f64>)> {
    match table {
        LogLikTable::Lin { feat: FeatureMap::Vech { d, linear: false, center: None }, w, cst } => Some((*d, w, cst)),
        _ => None,
    }
}

/// Single-precision candidate evaluator of one local step's table (built once per call).
pub(crate) struct Cand32 {
    d: usize,
    f: usize,
    k: usize,
    /// `R` (`D × D`, lower triangular): `ỹ = Rᵀ x`, i.e. `Ỹ = X R` for a block of rows
    r: Array2<f64>,
    /// whitened, per-column scaled and flushed table in `f32` (`F × K`)
    t32: TableF32,
    /// `2^{e_k}`: column `k` of `t32` is `T̃_k · 2^{-e_k}`
    tscale: Vec<f64>,
    /// raw table transposed (`K × F`, row-major) for the exact recomputation
    t64: Vec<f64>,
    cst: Vec<f64>,
    elp: Vec<f64>,
    /// `cst_k + E[ln π_k]`
    c: Vec<f64>,
    /// `‖T_k‖`, `‖T̃_k‖`, `‖T̃_k‖ + ‖E_k‖_F`, constant terms of the bound
    n_raw: Vec<f64>,
    n_wh: Vec<f64>,
    n_wh_e: Vec<f64>,
    kappa: Vec<f64>,
    /// row terms: `c₃₂`, `γ_D ‖R‖_F`, `2ρ + ρ² + γ_{2D+5}`, `γ_{2D} ‖H‖²_F`
    c32: f64,
    dl_coef: f64,
    x2_coef: f64,
    y2_coef: f64,
}

/// Scratch buffers of [`Cand32::tile`] (one per leaf); after a call, row `n`'s candidates are
/// `idx[ptr[n]..ptr[n+1]]` with their `f64` log weights in `val`.
#[derive(Default)]
pub(crate) struct Scratch32 {
    phi: Vec<f32>,
    w32: Vec<f32>,
    yt: Vec<f64>,
    y32: Vec<f32>,
    /// per row: feature scale `2^{2e_n}`, `‖φ(ỹ)‖`, `‖x‖²`, `‖ỹ‖`, `‖ỹ‖²`, fallback flag
    rscale: Vec<f64>,
    rnorm: Vec<f64>,
    rx2: Vec<f64>,
    ry: Vec<f64>,
    ry2: Vec<f64>,
    rall: Vec<bool>,
    lo: Vec<f64>,
    up: Vec<f64>,
    kth: Vec<f64>,
    stamp: Vec<u32>,
    cur: u32,
    cnt: Vec<u32>,
    order: Vec<u32>,
    owner: Vec<u32>,
    pub ptr: Vec<u32>,
    pub idx: Vec<u32>,
    pub val: Vec<f64>,
}

impl Scratch32 {
    /// Candidates of tile row `n` and their `f64` log weights.
    pub fn row(&self, n: usize) -> (&[u32], &[f64]) {
        let (a, b) = (self.ptr[n] as usize, self.ptr[n + 1] as usize);
        (&self.idx[a..b], &self.val[a..b])
    }
}

/// The value of the `l`-th largest of `w` (`1 ≤ l ≤ w.len()`), NaN counting as `−∞`, with plain
/// comparisons (the sign of a zero threshold does not matter to the `≥` test it feeds).
fn lth_largest_value(w: &[f64], l: usize, buf: &mut Vec<f64>) -> f64 {
    let key = |v: f64| if v.is_nan() { f64::NEG_INFINITY } else { v };
    buf.clear();
    if l > 32 {
        buf.extend(w.iter().map(|&v| key(v)));
        let (_, v, _) = buf.select_nth_unstable_by(l - 1, |a, b| b.total_cmp(a));
        return *v;
    }
    // `buf` holds the l largest values seen so far, decreasing
    let insert = |buf: &mut Vec<f64>, v: f64| {
        let mut pos = buf.len();
        while pos > 0 && buf[pos - 1] < v {
            pos -= 1;
        }
        buf.insert(pos, v);
    };
    for &v in &w[..l] {
        insert(buf, key(v));
    }
    let mut thr = buf[l - 1];
    for &v in &w[l..] {
        if v > thr {
            buf.pop();
            insert(buf, v);
            thr = buf[l - 1];
        }
    }
    thr
}

/// Row terms of the error bound (see [`bounds`]).
struct RowBound {
    sc: f64,
    alpha: f64,
    a_n: f64,
    b_n: f64,
    ms: f64,
    slack: f64,
}

/// `v_k = g_k 2^{e_n + e_k} + c_k` and `lo/up = v ∓ e_nk` for one row.
#[inline(always)]
fn bounds_impl(c: &Cand32, rb: &RowBound, g: &[f32], lo: &mut [f64], up: &mut [f64]) {
    let k = g.len();
    let (ts, cc, nw, nr, nwe, ka) = (&c.tscale[..k], &c.c[..k], &c.n_wh[..k], &c.n_raw[..k], &c.n_wh_e[..k], &c.kappa[..k]);
    let (lo, up) = (&mut lo[..k], &mut up[..k]);
    for kk in 0..k {
        let v = g[kk] as f64 * (rb.sc * ts[kk]) + cc[kk];
        let e = rb.alpha * nw[kk] + rb.a_n * nr[kk] + rb.b_n * nwe[kk] + rb.ms * ka[kk] + rb.slack * v.abs();
        lo[kk] = v - e;
        up[kk] = v + e;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn bounds_avx(c: &Cand32, rb: &RowBound, g: &[f32], lo: &mut [f64], up: &mut [f64]) {
    bounds_impl(c, rb, g, lo, up);
}

/// [`bounds_impl`] with 256-bit vectors where available.
fn bounds(c: &Cand32, rb: &RowBound, g: &[f32], lo: &mut [f64], up: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU supports AVX (checked just above).
            return unsafe { bounds_avx(c, rb, g, lo, up) };
        }
    }
    bounds_impl(c, rb, g, lo, up)
}

/// `out = vech(y yᵀ)` in `f32` (row by row of the upper triangle).
#[inline(always)]
fn vech_f32_impl(y: &[f32], out: &mut [f32]) {
    let d = y.len();
    let mut p = 0;
    for i in 0..d {
        let yi = y[i];
        for (o, &yj) in out[p..p + d - i].iter_mut().zip(&y[i..]) {
            *o = yi * yj;
        }
        p += d - i;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn vech_f32_avx(y: &[f32], out: &mut [f32]) {
    vech_f32_impl(y, out);
}

/// [`vech_f32_impl`] with 256-bit vectors where available (the same products).
fn vech_f32(y: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU supports AVX (checked just above).
            return unsafe { vech_f32_avx(y, out) };
        }
    }
    vech_f32_impl(y, out)
}

/// `Σ a_i b_i` with four partial sums (a fixed order: deterministic).
#[inline]
pub(super) fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut s = [0.0f64; 4];
    let mut ca = a.chunks_exact(4);
    let mut cb = b.chunks_exact(4);
    for (x, y) in (&mut ca).zip(&mut cb) {
        s[0] += x[0] * y[0];
        s[1] += x[1] * y[1];
        s[2] += x[2] * y[2];
        s[3] += x[3] * y[3];
    }
    let mut r = (s[0] + s[1]) + (s[2] + s[3]);
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        r += x * y;
    }
    r
}

/// `Σ_i a_i b_i − [delta]` by Ogita–Rump–Oishi's compensated dot product (error-free
/// products and sums, so `|result − exact| ≤ u₆₄|exact| + γ²_{n+1} Σ|terms|`); also returns
/// `Σ|a_i b_i| + [delta]` for that bound.
fn dot2_minus_delta(a: impl Iterator<Item = f64>, b: impl Iterator<Item = f64>, delta: bool) -> (f64, f64) {
    let (mut s, mut c, mut abs) = (0.0f64, 0.0f64, 0.0f64);
    let mut add = |p: f64, e: f64| {
        // TwoSum(s, p)
        let t = s + p;
        let z = t - s;
        let err = (s - (t - z)) + (p - z);
        s = t;
        c += err + e;
    };
    for (x, y) in a.zip(b) {
        let p = x * y;
        let e = x.mul_add(y, -p);
        abs += p.abs();
        add(p, e);
    }
    if delta {
        add(-1.0, 0.0);
        abs += 1.0;
    }
    (s + c, abs)
}

/// Lanes of [`quad_vech4`]'s partial sums.
const LANES: usize = 8;

/// `Σ_{i≤j} x_i x_j t[p(i,j)]` of four `(x, t)` pairs (the raw `vech` log-likelihood form of a
/// cluster at a row), in one fixed order of operations shared by every implementation below, so
/// their results are bit-identical: for each `i`, eight lane sums
/// `v_ℓ = fma(t[p + j], x[i + j], v_ℓ)` over `j ≡ ℓ (mod 8)`, `j < D − i` (lanes past the end
/// add `fma(0, 0, ·)`), then `a_ℓ = fma(x_i, v_ℓ, a_ℓ)`; the result is
/// `((a₀ + a₁) + (a₂ + a₃)) + ((a₄ + a₅) + (a₆ + a₇))`. Every term passes through at most
/// `⌈D/8⌉ + D + 3 ≤ 2D + 5` roundings, the count the error bound `γ_{2D+5}` of the recomputation
/// assumes (module docs).
#[inline(always)]
fn quad_vech4_impl(x: [&[f64]; 4], t: [&[f64]; 4]) -> [f64; 4] {
    let d = x[0].len();
    let mut acc = [[0.0f64; LANES]; 4];
    let mut p = 0;
    for i in 0..d {
        let len = d - i;
        for r in 0..4 {
            let (seg, xs) = (&t[r][p..p + len], &x[r][i..]);
            let mut v = [0.0f64; LANES];
            for j0 in (0..len).step_by(LANES) {
                for (l, vl) in v.iter_mut().enumerate() {
                    let j = j0 + l;
                    let (a, b) = if j < len { (seg[j], xs[j]) } else { (0.0, 0.0) };
                    *vl = a.mul_add(b, *vl);
                }
            }
            for (al, &vl) in acc[r].iter_mut().zip(&v) {
                *al = x[r][i].mul_add(vl, *al);
            }
        }
        p += len;
    }
    acc.map(|a| lane_sum(&a))
}

/// `((a₀ + a₁) + (a₂ + a₃)) + ((a₄ + a₅) + (a₆ + a₇))`.
#[inline(always)]
fn lane_sum(a: &[f64; LANES]) -> f64 {
    ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}

/// Checks shared by the vector kernels: `D`-long rows, `F`-long tables.
fn check_quad_args(x: [&[f64]; 4], t: [&[f64]; 4]) {
    let d = x[0].len();
    for r in 0..4 {
        assert!(x[r].len() == d && t[r].len() == d * (d + 1) / 2, "quad_vech4: lengths");
    }
}

/// AVX2/FMA version of [`quad_vech4_impl`]: lanes 0–3 and 4–7 in two 256-bit registers, the
/// same fused operations lane by lane (bit-identical results). With `SAME` the four pairs share
/// `t[0]` (each table vector is loaded once for the four rows).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn quad_vech4_avx2<const SAME: bool>(x: [&[f64]; 4], t: [&[f64]; 4]) -> [f64; 4] {
    use std::arch::x86_64::*;
    check_quad_args(x, t);
    let d = x[0].len();
    let mut acc = [[_mm256_setzero_pd(); 2]; 4];
    let mut p = 0;
    for i in 0..d {
        let len = d - i;
        let mut v = [[_mm256_setzero_pd(); 2]; 4];
        for j in (0..len).step_by(LANES) {
            // lanes ℓ < len − j load, the others read as zero
            let m = (len - j).min(LANES) as i64;
            let lane = |l: i64| if l < m { -1i64 } else { 0 };
            let (m0, m1) = (_mm256_setr_epi64x(lane(0), lane(1), lane(2), lane(3)), _mm256_setr_epi64x(lane(4), lane(5), lane(6), lane(7)));
            // SAFETY: the masked loads touch only entries p + j + ℓ < p + len ≤ F of a table and
            // i + j + ℓ < d of a row (lengths checked above).
            unsafe {
                let load_t = |r: usize| {
                    let tp = t[r].as_ptr().add(p + j);
                    (_mm256_maskload_pd(tp, m0), _mm256_maskload_pd(tp.add(4), m1))
                };
                let shared = if SAME { Some(load_t(0)) } else { None };
                for r in 0..4 {
                    let (t0, t1) = shared.unwrap_or_else(|| load_t(r));
                    let xp = x[r].as_ptr().add(i + j);
                    v[r][0] = _mm256_fmadd_pd(t0, _mm256_maskload_pd(xp, m0), v[r][0]);
                    v[r][1] = _mm256_fmadd_pd(t1, _mm256_maskload_pd(xp.add(4), m1), v[r][1]);
                }
            }
        }
        for r in 0..4 {
            let xi = _mm256_set1_pd(x[r][i]);
            acc[r][0] = _mm256_fmadd_pd(xi, v[r][0], acc[r][0]);
            acc[r][1] = _mm256_fmadd_pd(xi, v[r][1], acc[r][1]);
        }
        p += len;
    }
    acc.map(|[lo, hi]| {
        let mut a = [0.0f64; LANES];
        // SAFETY: `a` holds eight f64, two unaligned 256-bit stores fill it.
        unsafe {
            _mm256_storeu_pd(a.as_mut_ptr(), lo);
            _mm256_storeu_pd(a.as_mut_ptr().add(4), hi);
        }
        lane_sum(&a)
    })
}

/// AVX-512 version of [`quad_vech4_impl`]: the eight lanes in one 512-bit register, the same
/// fused operations lane by lane (bit-identical results); `SAME` as in [`quad_vech4_avx2`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn quad_vech4_avx512<const SAME: bool>(x: [&[f64]; 4], t: [&[f64]; 4]) -> [f64; 4] {
    use std::arch::x86_64::*;
    check_quad_args(x, t);
    let d = x[0].len();
    let mut acc = [_mm512_setzero_pd(); 4];
    let mut p = 0;
    for i in 0..d {
        let len = d - i;
        let mut v = [_mm512_setzero_pd(); 4];
        for j in (0..len).step_by(LANES) {
            let m = (((1u32 << (len - j).min(LANES)) - 1) & 0xff) as __mmask8;
            // SAFETY: as in `quad_vech4_avx2`, masked lanes stay inside the table and the row.
            unsafe {
                let load_t = |r: usize| _mm512_maskz_loadu_pd(m, t[r].as_ptr().add(p + j));
                let shared = if SAME { Some(load_t(0)) } else { None };
                for r in 0..4 {
                    let tv = shared.unwrap_or_else(|| load_t(r));
                    v[r] = _mm512_fmadd_pd(tv, _mm512_maskz_loadu_pd(m, x[r].as_ptr().add(i + j)), v[r]);
                }
            }
        }
        for r in 0..4 {
            acc[r] = _mm512_fmadd_pd(_mm512_set1_pd(x[r][i]), v[r], acc[r]);
        }
        p += len;
    }
    acc.map(|v| {
        let mut a = [0.0f64; LANES];
        // SAFETY: `a` holds eight f64, one unaligned 512-bit store fills it.
        unsafe { _mm512_storeu_pd(a.as_mut_ptr(), v) };
        lane_sum(&a)
    })
}

/// [`quad_vech4_impl`] with the widest fused multiply-adds the CPU has (bit-identical results);
/// `same_table` says that the four pairs share `t[0]`.
fn quad_vech4(x: [&[f64]; 4], t: [&[f64]; 4], same_table: bool) -> [f64; 4] {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            return unsafe {
                if same_table {
                    quad_vech4_avx512::<true>(x, t)
                } else {
                    quad_vech4_avx512::<false>(x, t)
                }
            };
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            return unsafe {
                if same_table {
                    quad_vech4_avx2::<true>(x, t)
                } else {
                    quad_vech4_avx2::<false>(x, t)
                }
            };
        }
    }
    quad_vech4_impl(x, t)
}

/// Whether fused multiply-adds run in hardware here (else `f64::mul_add` is a slow software
/// routine and the `f64` recomputation would cost more than the `f32` GEMM saves).
fn hardware_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        cfg!(target_arch = "aarch64")
    }
}

/// `Σ_{i≤j} x_i x_j t[p(i,j)]` in `f64` for one pair, in [`quad_vech4`]'s order (the same bits).
#[cfg(test)]
fn quad_vech(x: &[f64], t: &[f64]) -> f64 {
    quad_vech4([x; 4], [t; 4], true)[0]
}

impl Cand32 {
    /// Prepare the evaluator if the path applies: zero-mean `vech` table, `K ≥`
    /// [`MIN_CLUSTERS`], `F·K ≥` [`MIN_GEMM_WIDTH`], `L ≤ K /` [`MIN_K_OVER_L`], at least
    /// [`MIN_ROWS_PER_DIM`]` · D` rows, finite table with scales in range. `None` means "use the
    /// `f64` GEMM".
    pub fn prepare(table: &LogLikTable, elp: &[f64], n_rows: usize, l: usize) -> Option<Cand32> {
        let (d, w, cst) = zero_mean_vech(table)?;
        let f = w.nrows();
        let k = w.ncols();
        if k < MIN_CLUSTERS
            || f * k < MIN_GEMM_WIDTH
            || l.saturating_mul(MIN_K_OVER_L) > k
            || n_rows < MIN_ROWS_PER_DIM * d
            || !hardware_fma()
        {
            return None;
        }
        Self::build(d, w.view(), cst.as_slice()?, elp)
    }

    /// Build without the size checks (tests).
    pub fn build(d: usize, w: ArrayView2<f64>, cst: &[f64], elp: &[f64]) -> Option<Cand32> {
        let f = w.nrows();
        let k = w.ncols();
        if f != d * (d + 1) / 2 || cst.len() != k || elp.len() != k {
            return None;
        }
        if w.iter().chain(cst).any(|v| !v.is_finite()) {
            return None;
        }
        // raw table transposed (one row per cluster), for the exact recomputation
        let mut t64 = vec![0.0; k * f];
        for p0 in (0..f).step_by(64) {
            for kk in 0..k {
                for p in p0..(p0 + 64).min(f) {
                    t64[kk * f + p] = w[[p, kk]];
                }
            }
        }
        // mean quadratic form M = −mean_k A_k (A_k = unvech'(T_k), off-diagonals halved)
        let mut tsum = vec![0.0; f];
        for kk in 0..k {
            tsum.iter_mut().zip(&t64[kk * f..(kk + 1) * f]).for_each(|(a, &b)| *a += b);
        }
        let unvech_into = |t: &[f64], scale: f64, a: &mut ndarray::ArrayViewMut2<f64>| {
            let mut p = 0;
            for i in 0..d {
                a[[i, i]] = scale * t[p];
                p += 1;
                for j in i + 1..d {
                    let v = 0.5 * scale * t[p];
                    a[[i, j]] = v;
                    a[[j, i]] = v;
                    p += 1;
                }
            }
        };
        let mut m = Array2::<f64>::zeros((d, d));
        unvech_into(&tsum, -1.0 / k as f64, &mut m.view_mut());
        // whitening R (identity if M is not positive definite: still exact, more candidates)
        let r = cholesky(m.view(), 0, "mean precision").unwrap_or_else(|_| Array2::eye(d));
        let h = inv_lower(r.view());
        if h.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let g: Vec<f64> = r.t().iter().cloned().collect();
        let gv = ArrayView2::from_shape((d, d), &g[..]).expect("d x d");
        let fro = |a: &Array2<f64>| a.iter().map(|v| v * v).sum::<f64>().sqrt();
        let (nr, nh) = (fro(&r), fro(&h));
        // ρ ≥ ‖Hᵀ Rᵀ − I‖₂ from the compensated residual (a plain product would leave a
        // rounding bound γ_D ‖H‖_F ‖R‖_F, orders of magnitude above the residual itself)
        let mut res2 = 0.0;
        let mut abs2 = 0.0;
        for i in 0..d {
            for j in 0..d {
                let hi = h.column(i);
                let (r, a) = dot2_minus_delta(hi.iter().cloned(), gv.column(j).iter().cloned(), i == j);
                res2 += r * r;
                abs2 += a * a;
            }
        }
        let gd1 = gamma(d + 1, U64);
        let rho = (res2.sqrt() * (1.0 + 4.0 * U64) + gd1 * gd1 * abs2.sqrt()) * FUDGE;
        let g2d = gamma(2 * d, U64);
        // error of quad_vech: sums of ≤ D + 1 terms nested in a sum of D terms
        let gex = gamma(2 * d + 5, U64);
        // whitened forms Ã_k = H A_k Hᵀ, CH clusters per pair of GEMMs: [HA_1 … HA_CH] = H [A_1 … A_CH]
        // (D × CH·D), whose rows read as a (D·CH) × D matrix are the rows of the HA_c, then
        // times Hᵀ; chunks in parallel (each cluster's result does not depend on the chunking)
        const CH: usize = 16;
        struct Col {
            t: Vec<f32>,
            n_raw: f64,
            n_wh: f64,
            e: i32,
        }
        let chunks: Vec<Option<Vec<Col>>> = (0..k.div_ceil(CH))
            .into_par_iter()
            .map(|ci| {
                let k0 = ci * CH;
                let nc = CH.min(k - k0);
                let mut a_all = Array2::<f64>::zeros((d, nc * d));
                for c in 0..nc {
                    let mut blk = a_all.slice_mut(ndarray::s![.., c * d..(c + 1) * d]);
                    unvech_into(&t64[(k0 + c) * f..(k0 + c + 1) * f], 1.0, &mut blk);
                }
                let mut b_all = Array2::<f64>::zeros((d, nc * d));
                gemm(1.0, h.view(), a_all.view(), 0.0, b_all.view_mut());
                let b_rows = b_all.into_shape_with_order((d * nc, d)).expect("contiguous");
                let mut at = Array2::<f64>::zeros((d * nc, d));
                gemm(1.0, b_rows.view(), h.t(), 0.0, at.view_mut());
                let mut out = Vec::with_capacity(nc);
                for c in 0..nc {
                    // Ã_c[i, j] is row i·nc + c of `at`
                    let mut t = vec![0.0f64; f];
                    let mut p = 0;
                    for i in 0..d {
                        let row = at.row(i * nc + c);
                        t[p] = row[i];
                        p += 1;
                        for j in i + 1..d {
                            t[p] = 2.0 * row[j];
                            p += 1;
                        }
                    }
                    let raw = &t64[(k0 + c) * f..(k0 + c + 1) * f];
                    let n_raw = dot(raw, raw).sqrt();
                    let n_wh = dot(&t, &t).sqrt();
                    let mx = t.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                    if !(n_wh.is_finite() && n_raw.is_finite()) {
                        return None;
                    }
                    let e = if mx > 0.0 { exponent(mx) } else { 0 };
                    if e.abs() > MAX_EXP {
                        return None;
                    }
                    let inv = pow2(-e);
                    let t = t
                        .iter()
                        .map(|&v| {
                            let v = v * inv;
                            if v.abs() < TAU {
                                0.0
                            } else {
                                v as f32
                            }
                        })
                        .collect();
                    out.push(Col { t, n_raw, n_wh, e });
                }
                Some(out)
            })
            .collect();
        let mut cols: Vec<Col> = Vec::with_capacity(k);
        for ch in chunks {
            cols.extend(ch?);
        }
        let mut t32 = vec![0.0f32; f * k];
        for p0 in (0..f).step_by(64) {
            for (kk, col) in cols.iter().enumerate() {
                for p in p0..(p0 + 64).min(f) {
                    t32[p * k + kk] = col.t[p];
                }
            }
        }
        let tscale: Vec<f64> = cols.iter().map(|c| pow2(c.e)).collect();
        let n_raw: Vec<f64> = cols.iter().map(|c| c.n_raw).collect();
        let n_wh: Vec<f64> = cols.iter().map(|c| c.n_wh).collect();
        let n_wh_e: Vec<f64> = cols.iter().map(|c| c.n_wh + g2d * nh * nh * c.n_raw).collect();
        let c: Vec<f64> = cst.iter().zip(elp).map(|(a, b)| a + b).collect();
        let kappa = cst.iter().zip(elp).map(|(a, b)| if b.is_finite() { (gex + ADD_SLACK) * (a.abs() + b.abs()) } else { 0.0 }).collect();
        let ff = f as f64;
        // features fl32(fl32(ỹ_i 2^-e) fl32(ỹ_j 2^-e)): relative error (1+u)³ − 1
        let uphi = (1.0 + U32).powi(3) - 1.0;
        let c32 = (gamma(f, U32) * (1.0 + uphi) * (1.0 + U32)
            + uphi * (1.0 + U32)
            + U32
            + ff.sqrt() * (4.0 * TAU_Y * (1.0 + U32) + 2.0 * TAU)
            + 32.0 * ff * pow2(-150))
            * FUDGE;
        Some(Cand32 {
            d,
            f,
            k,
            r,
            t32: TableF32::new(f, k, t32),
            tscale,
            t64,
            cst: cst.to_vec(),
            elp: elp.to_vec(),
            c,
            n_raw,
            n_wh,
            n_wh_e,
            kappa,
            c32,
            dl_coef: gamma(d, U64) * nr,
            x2_coef: 2.0 * rho + rho * rho + gex,
            y2_coef: g2d * nh * nh,
        })
    }

    /// Candidates of every row of the tile `x` for the top `l` (plus the clusters `extra`,
    /// needed by restricted-step proposals) with their `f64` log weights, into `s`
    /// (see [`Scratch32::row`]).
    pub fn tile(&self, x: ArrayView2<f64>, l: usize, extra: &[u32], s: &mut Scratch32) {
        self.tile_with_margin(x, l, extra, s, 1.0);
    }

    /// [`Cand32::tile`] with the error bound multiplied by `margin_scale` (tests show that the
    /// bound is needed: with 0 the `f32` choice alone misses exact top-`L` members).
    pub fn tile_with_margin(&self, x: ArrayView2<f64>, l: usize, extra: &[u32], s: &mut Scratch32, margin_scale: f64) {
        let (d, f, k) = (self.d, self.f, self.k);
        let rows = x.nrows();
        // every row of `phi` is overwritten below; `w32` is written by the GEMM (β = 0)
        if s.phi.len() < rows * f {
            s.phi.resize(rows * f, 0.0);
        }
        if s.w32.len() < rows * k {
            s.w32.resize(rows * k, 0.0);
        }
        for v in [&mut s.rscale, &mut s.rnorm, &mut s.rx2, &mut s.ry, &mut s.ry2] {
            v.clear();
            v.resize(rows, 0.0);
        }
        s.rall.clear();
        s.rall.resize(rows, false);
        // whitened rows Ỹ = X R (one small GEMM), then per row the features
        // fl32(fl32(ỹ_i 2^-e) fl32(ỹ_j 2^-e)) with max_i |ỹ_i| 2^-e ∈ [0.5, 1)
        if s.yt.len() < rows * d {
            s.yt.resize(rows * d, 0.0);
        }
        {
            let yt = ndarray::ArrayViewMut2::from_shape((rows, d), &mut s.yt[..rows * d]).expect("tile rows");
            gemm(1.0, x, self.r.view(), 0.0, yt);
        }
        s.y32.resize(d, 0.0);
        for n in 0..rows {
            let xr = x.row(n);
            let xr = xr.as_slice().expect("contiguous rows");
            let y = &s.yt[n * d..(n + 1) * d];
            let x2 = dot(xr, xr);
            let y2 = dot(y, y);
            let y4: f64 = y.iter().map(|v| (v * v) * (v * v)).sum();
            let mx = y.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            // ‖vech(ỹỹᵀ)‖² = Σ_{i≤j} ỹ_i²ỹ_j² = ((Σỹ²)² + Σỹ⁴) / 2
            let phi2 = 0.5 * (y2 * y2 + y4);
            s.rx2[n] = x2;
            s.ry2[n] = y2;
            s.ry[n] = y2.sqrt();
            s.rnorm[n] = phi2.sqrt();
            let e = if mx > 0.0 { exponent(mx) } else { 0 };
            let o = &mut s.phi[n * f..(n + 1) * f];
            if !(x2.is_finite() && phi2.is_finite()) || 2 * e.abs() > MAX_EXP {
                s.rall[n] = true;
                o.iter_mut().for_each(|v| *v = 0.0);
                continue;
            }
            s.rscale[n] = pow2(2 * e);
            let inv = pow2(-e);
            for (o, &v) in s.y32.iter_mut().zip(y) {
                let t = v * inv;
                *o = if t.abs() < TAU_Y { 0.0 } else { t as f32 };
            }
            vech_f32(&s.y32, o);
        }
        self.t32.gemm_rows(rows, &s.phi[..rows * f], &mut s.w32[..rows * k]);
        // candidates: clusters whose upper bound reaches the l-th largest lower bound
        s.ptr.clear();
        s.ptr.push(0);
        s.idx.clear();
        if s.stamp.len() != k {
            s.stamp = vec![0; k];
            s.cur = 0;
        }
        s.lo.resize(k, 0.0);
        s.up.resize(k, 0.0);
        for n in 0..rows {
            s.cur = s.cur.wrapping_add(1);
            if s.cur == 0 {
                s.stamp.iter_mut().for_each(|v| *v = 0);
                s.cur = 1;
            }
            let start = s.idx.len();
            if s.rall[n] {
                s.idx.extend(0..k as u32);
            } else {
                let sc = s.rscale[n];
                let dl = self.dl_coef * s.rx2[n].sqrt();
                let ms = margin_scale * FUDGE;
                let alpha = self.c32 * s.rnorm[n] * ms;
                let a_n = (self.x2_coef * s.rx2[n] + self.y2_coef * s.ry2[n]) * ms;
                let b_n = (2.0 * dl * (s.ry[n] + dl) + dl * dl) * ms;
                let slack = ADD_SLACK * ms;
                // lower and upper bounds v ∓ e of every cluster (a cluster with E[ln π] = −∞
                // gets lo = −∞ and up = NaN: never a candidate, and its exact value is −∞,
                // which is what the local step's row of candidates holds for non-candidates)
                let rb = RowBound { sc, alpha, a_n, b_n, ms, slack };
                bounds(self, &rb, &s.w32[n * k..(n + 1) * k], &mut s.lo[..k], &mut s.up[..k]);
                let thr = lth_largest_value(&s.lo[..k], l, &mut s.kth);
                // blocks of 8 clusters with no upper bound reaching `thr` are skipped at once
                for (b, blk) in s.up[..k].chunks(8).enumerate() {
                    if blk.iter().fold(false, |a, &u| a | (u >= thr)) {
                        for (j, &u) in blk.iter().enumerate() {
                            if u >= thr {
                                s.idx.push((b * 8 + j) as u32);
                            }
                        }
                    }
                }
            }
            for &c in &s.idx[start..] {
                s.stamp[c as usize] = s.cur;
            }
            for &c in extra {
                if s.stamp[c as usize] != s.cur {
                    s.stamp[c as usize] = s.cur;
                    s.idx.push(c);
                }
            }
            s.ptr.push(s.idx.len() as u32);
        }
        // exact f64 log weights of the candidates, cluster by cluster (each raw table column is
        // read once per tile): (q_k(x_n) + cst_k) + E[ln π_k], the dense kernel's association
        let total = s.idx.len();
        s.val.clear();
        s.val.resize(total, 0.0);
        s.owner.clear();
        s.owner.resize(total, 0);
        for n in 0..rows {
            for q in s.ptr[n] as usize..s.ptr[n + 1] as usize {
                s.owner[q] = n as u32;
            }
        }
        s.cnt.clear();
        s.cnt.resize(k + 1, 0);
        for &c in &s.idx {
            s.cnt[c as usize + 1] += 1;
        }
        for j in 0..k {
            s.cnt[j + 1] += s.cnt[j];
        }
        s.order.clear();
        s.order.resize(total, 0);
        for (q, &c) in s.idx.iter().enumerate() {
            let p = &mut s.cnt[c as usize];
            s.order[*p as usize] = q as u32;
            *p += 1;
        }
        // (after the scatter `cnt[c]` is the end of bucket `c`, whose start is the end of `c − 1`);
        // four pairs at a time, in this cluster-major order
        let pair = |q: usize, s: &Scratch32| -> (usize, usize) { (s.owner[q] as usize, s.idx[q] as usize) };
        // (a last group of one to three pairs is padded with its last pair, computed and discarded)
        for q4 in (0..total).step_by(4) {
            let qs: [usize; 4] = std::array::from_fn(|r| s.order[(q4 + r).min(total - 1)] as usize);
            let xs: [&[f64]; 4] = std::array::from_fn(|r| x.row(pair(qs[r], s).0).to_slice().expect("contiguous rows"));
            let ts: [&[f64]; 4] = std::array::from_fn(|r| {
                let c = pair(qs[r], s).1;
                &self.t64[c * f..(c + 1) * f]
            });
            let c0 = pair(qs[0], s).1;
            let v = quad_vech4(xs, ts, (1..4).all(|r| pair(qs[r], s).1 == c0));
            for r in 0..(total - q4).min(4) {
                let c = pair(qs[r], s).1;
                s.val[qs[r]] = (v[r] + self.cst[c]) + self.elp[c];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::top_l::select_top_l;

    fn lcg(seed: &mut u64) -> f64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 11) as f64) / ((1u64 << 53) as f64)
    }

    fn normal(seed: &mut u64) -> f64 {
        let u1 = lcg(seed).max(1e-300);
        let u2 = lcg(seed);
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Random negative-definite quadratic forms (`A_k = −½ Λ_k`) with very different scales and
    /// conditioning, in raw `vech'` layout.
    fn table(d: usize, k: usize, seed: &mut u64) -> (Array2<f64>, Vec<f64>, Vec<f64>) {
        let f = d * (d + 1) / 2;
        let mut w = Array2::<f64>::zeros((f, k));
        let mut cst = vec![0.0; k];
        for kk in 0..k {
            let mut b = Array2::<f64>::zeros((d, d));
            for v in b.iter_mut() {
                *v = normal(seed);
            }
            let s = (10.0f64).powf(4.0 * lcg(seed) - 2.0);
            let mut lam = b.t().dot(&b) * s;
            for i in 0..d {
                lam[[i, i]] += 1e-3 * s * (1.0 + 1e3 * lcg(seed));
            }
            let mut p = 0;
            for i in 0..d {
                for j in i..d {
                    w[[p, kk]] = if i == j { -0.5 * lam[[i, i]] } else { -lam[[i, j]] };
                    p += 1;
                }
            }
            cst[kk] = 5.0 * normal(seed);
        }
        let elp: Vec<f64> = (0..k).map(|_| -3.0 + normal(seed)).collect();
        (w, cst, elp)
    }

    fn exact_top(x: &[f64], w: &Array2<f64>, cst: &[f64], elp: &[f64], l: usize) -> Vec<u32> {
        let k = cst.len();
        let t: Vec<f64> = (0..k)
            .map(|kk| {
                let col: Vec<f64> = w.column(kk).to_vec();
                (quad_vech(x, &col) + cst[kk]) + elp[kk]
            })
            .collect();
        let mut s = Vec::new();
        let mut idx = Vec::new();
        select_top_l(&t, l, &mut s, &mut idx);
        idx
    }

    fn select_from(c: &Scratch32, n: usize, k: usize, l: usize) -> Vec<u32> {
        let mut buf = vec![f64::NEG_INFINITY; k];
        let (ix, v) = c.row(n);
        for (&i, &v) in ix.iter().zip(v) {
            buf[i as usize] = v;
        }
        let mut s = Vec::new();
        let mut idx = Vec::new();
        select_top_l(&buf, l, &mut s, &mut idx);
        idx
    }

    #[test]
    fn candidates_contain_the_exact_top_l() {
        let mut seed = 11u64;
        let (d, k, rows) = (12, 96, 300);
        let (w, cst, elp) = table(d, k, &mut seed);
        let c = Cand32::build(d, w.view(), &cst, &elp).expect("applicable");
        let mut x = Array2::<f64>::zeros((rows, d));
        for (n, mut r) in x.rows_mut().into_iter().enumerate() {
            let sc = (10.0f64).powi((n % 7) as i32 - 3);
            r.iter_mut().for_each(|v| *v = sc * normal(&mut seed));
        }
        let mut s = Scratch32::default();
        for l in [1, 2, 4, 8] {
            c.tile(x.view(), l, &[], &mut s);
            let mut n_cand = 0;
            for n in 0..rows {
                let xr: Vec<f64> = x.row(n).to_vec();
                assert_eq!(select_from(&s, n, k, l), exact_top(&xr, &w, &cst, &elp, l), "row {n} l {l}");
                n_cand += s.row(n).0.len();
            }
            // the bound is rigorous but not loose: few extra candidates on this table
            assert!(n_cand as f64 <= rows as f64 * (l as f64 + 2.0), "l={l}: {n_cand} candidates");
        }
    }

    #[test]
    fn near_ties_need_the_margin() {
        // cluster 1 is cluster 0 with its form scaled by 1 + 1e-8 (the same f32 table column)
        // and its constant shifted so that it wins exactly the rows with q_0(x) below the median:
        // the f32 values see only the constant and pick the same cluster on every row, the
        // bounded candidates always hold both and the exact choice
        let mut seed = 5u64;
        let (d, k, rows) = (12, 64, 400);
        let (mut w, mut cst, mut elp) = table(d, k, &mut seed);
        let eps = 1e-8;
        for p in 0..w.nrows() {
            w[[p, 1]] = w[[p, 0]] * (1.0 + eps);
        }
        let mut x = Array2::<f64>::zeros((rows, d));
        x.iter_mut().for_each(|v| *v = normal(&mut seed));
        let col0: Vec<f64> = w.column(0).to_vec();
        let mut q0: Vec<f64> = (0..rows).map(|n| quad_vech(&x.row(n).to_vec(), &col0)).collect();
        q0.sort_by(f64::total_cmp);
        cst[1] = cst[0] - eps * q0[rows / 2];
        elp[0] += 1e4;
        elp[1] = elp[0];
        let c = Cand32::build(d, w.view(), &cst, &elp).expect("applicable");
        let mut s = Scratch32::default();
        let mut wrong_without = 0;
        let mut ones = 0;
        let mut both = 0;
        for (scale, expect_exact) in [(1.0, true), (0.0, false)] {
            c.tile_with_margin(x.view(), 1, &[], &mut s, scale);
            for n in 0..rows {
                let xr: Vec<f64> = x.row(n).to_vec();
                let want = exact_top(&xr, &w, &cst, &elp, 1);
                let got = select_from(&s, n, k, 1);
                if expect_exact {
                    assert_eq!(got, want, "row {n}");
                    both += usize::from(s.row(n).0.contains(&0) && s.row(n).0.contains(&1));
                    ones += usize::from(want == [1]);
                } else if got != want {
                    wrong_without += 1;
                }
            }
        }
        assert!(ones > 0 && ones < rows, "both clusters win some rows ({ones})");
        // (rows with a tiny |x| have |q_0(x) − median| ≫ the bound: one candidate suffices there)
        assert!(both > rows / 2, "both near-tied clusters are candidates on most rows ({both})");
        assert!(wrong_without > 0, "without the margin the f32 choice should err on some row");
    }

    #[test]
    fn lth_largest_value_matches_sorting() {
        let mut seed = 2u64;
        let mut buf = Vec::new();
        for trial in 0..300 {
            let k = 1 + trial % 70;
            let w: Vec<f64> = (0..k)
                .map(|_| {
                    let u = lcg(&mut seed);
                    if u < 0.1 {
                        f64::NEG_INFINITY
                    } else if u < 0.15 {
                        f64::NAN
                    } else if u < 0.4 {
                        (u * 4.0).floor()
                    } else {
                        normal(&mut seed)
                    }
                })
                .collect();
            let mut sorted: Vec<f64> = w.iter().map(|&v| if v.is_nan() { f64::NEG_INFINITY } else { v }).collect();
            sorted.sort_by(|a, b| b.total_cmp(a));
            for l in 1..=k {
                assert_eq!(lth_largest_value(&w, l, &mut buf), sorted[l - 1], "k={k} l={l}");
            }
        }
    }

    #[test]
    fn selection_among_candidates_equals_selection_over_the_row() {
        // rows that are −∞ outside the candidates (as the local step builds them), with ties,
        // −∞ and NaN among the candidates
        let mut seed = 4u64;
        let (mut a, mut b, mut s1, mut s2) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for trial in 0..2000 {
            let k = 4 + trial % 40;
            let mut w = vec![f64::NEG_INFINITY; k];
            let mut cand: Vec<u32> = (0..k as u32).filter(|_| lcg(&mut seed) < 0.3).collect();
            if cand.is_empty() {
                cand.push(0);
            }
            for &c in &cand {
                let u = lcg(&mut seed);
                w[c as usize] = if u < 0.15 {
                    f64::NEG_INFINITY
                } else if u < 0.2 {
                    f64::NAN
                } else {
                    (u * 5.0).floor()
                };
            }
            cand.reverse(); // order does not matter
            for l in 1..=k {
                let m1 = crate::local::select_top_l_of_candidates(&w, l, &cand, &mut s1, &mut a);
                let m2 = select_top_l(&w, l, &mut s2, &mut b);
                assert_eq!((m1, &a), (m2, &b), "w={w:?} cand={cand:?} l={l}");
            }
        }
    }

    #[test]
    fn four_pair_evaluation_is_bit_identical_and_within_its_bound() {
        let mut seed = 1u64;
        for d in [1, 2, 3, 5, 7, 8, 9, 12, 13, 16, 17, 64] {
            let f = d * (d + 1) / 2;
            let xs: Vec<Vec<f64>> = (0..4).map(|_| (0..d).map(|_| normal(&mut seed) * 1e3).collect()).collect();
            let ts: Vec<Vec<f64>> = (0..4).map(|_| (0..f).map(|_| normal(&mut seed) * 1e5).collect()).collect();
            let x4: [&[f64]; 4] = std::array::from_fn(|r| &xs[r][..]);
            let t4: [&[f64]; 4] = std::array::from_fn(|r| &ts[r][..]);
            let one: [&[f64]; 4] = [t4[0]; 4];
            // the scalar order, every dispatch of it, four tables and one shared table
            let (want, want_one) = (quad_vech4_impl(x4, t4), quad_vech4_impl(x4, one));
            let mut got =
                vec![(quad_vech4(x4, t4, false), want), (quad_vech4(x4, one, true), want_one), (quad_vech4(x4, one, false), want_one)];
            #[cfg(target_arch = "x86_64")]
            {
                if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU supports AVX2 and FMA (checked just above).
                    unsafe { got.extend([(quad_vech4_avx2::<false>(x4, t4), want), (quad_vech4_avx2::<true>(x4, one), want_one)]) };
                }
                if std::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU supports AVX-512F (checked just above).
                    unsafe { got.extend([(quad_vech4_avx512::<false>(x4, t4), want), (quad_vech4_avx512::<true>(x4, one), want_one)]) };
                }
            }
            for (g, w) in &got {
                for r in 0..4 {
                    assert_eq!(g[r].to_bits(), w[r].to_bits(), "d={d}");
                }
            }
            // the value: within γ_{2D+5} ‖x‖² ‖t‖ of a naive double sum in compensated arithmetic
            for r in 0..4 {
                assert_eq!(quad_vech(&xs[r], &ts[r]).to_bits(), want[r].to_bits());
                let mut p = 0;
                let mut terms = Vec::new();
                for i in 0..d {
                    for j in i..d {
                        terms.push(xs[r][i] * xs[r][j] * ts[r][p]);
                        p += 1;
                    }
                }
                terms.sort_by(|a, b| b.abs().total_cmp(&a.abs()));
                let (mut sum, mut c) = (0.0f64, 0.0f64);
                for &v in &terms {
                    let y = v - c;
                    let t = sum + y;
                    c = (t - sum) - y;
                    sum = t;
                }
                let bound = gamma(2 * d + 5, U64) * dot(&xs[r], &xs[r]) * dot(&ts[r], &ts[r]).sqrt();
                assert!((want[r] - sum).abs() <= bound, "d={d}: {} vs {sum}, bound {bound}", want[r]);
            }
        }
    }

    #[test]
    fn extra_columns_and_overflowing_rows() {
        let mut seed = 3u64;
        let (d, k) = (12, 64);
        let (w, cst, elp) = table(d, k, &mut seed);
        let c = Cand32::build(d, w.view(), &cst, &elp).expect("applicable");
        let mut x = Array2::<f64>::zeros((3, d));
        x.iter_mut().for_each(|v| *v = normal(&mut seed));
        x[[1, 0]] = 1e200; // vech overflows: every cluster is a candidate
        let mut s = Scratch32::default();
        c.tile(x.view(), 2, &[5, 7], &mut s);
        for n in 0..3 {
            let (ix, v) = s.row(n);
            assert!(ix.contains(&5) && ix.contains(&7));
            let mut sorted = ix.to_vec();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), ix.len(), "no duplicates");
            for (&i, &val) in ix.iter().zip(v) {
                let xr: Vec<f64> = x.row(n).to_vec();
                let col: Vec<f64> = w.column(i as usize).to_vec();
                let want = (quad_vech(&xr, &col) + cst[i as usize]) + elp[i as usize];
                assert!(val == want || (val.is_nan() && want.is_nan()));
            }
        }
        assert_eq!(s.row(1).0.len(), k);
    }
}
