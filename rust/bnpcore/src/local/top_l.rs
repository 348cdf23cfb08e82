//! Top-L selection for L-sparse responsibilities (Hughes thesis Alg. 7.2, §7.1.2).
//!
//! Per row, the support `T_n` is the set of the `L` largest log weights under the total order
//! "larger value first, then smaller index first" (NaN counts as `−∞`), so every selection
//! algorithm returns the same set. Responsibilities are the softmax of the gathered weights in
//! ascending-index order: `r_nk = exp(W_nk − lse⁽ᴸ⁾_n)` for `k ∈ T_n`, the exact optimum of the
//! per-row objective under "at most L non-zeros" (Hughes thesis eqs. 7.2, 7.4).

use std::cmp::Ordering;

/// Padding index of a sparse row slot (with value 0).
pub const NONE: u32 = u32::MAX;

#[inline]
fn key(v: f64) -> f64 {
    if v.is_nan() {
        f64::NEG_INFINITY
    } else {
        v
    }
}

/// The total order of the selection: `Less` means "`a` ranks before `b`".
#[inline]
pub fn rank_cmp(w: &[f64], a: u32, b: u32) -> Ordering {
    key(w[b as usize]).total_cmp(&key(w[a as usize])).then(a.cmp(&b))
}

/// Move the `l` best candidates (by [`rank_cmp`] on `w`) to the front of `cand` and sort them
/// by ascending index; returns how many were kept (`min(l, cand.len())`). Linear time
/// (`select_nth_unstable_by`, a single argmax pass for `l == 1`); no allocation.
pub fn select_top_among(w: &[f64], cand: &mut [u32], l: usize) -> usize {
    let m = cand.len();
    if l == 0 || m == 0 {
        return 0;
    }
    if l >= m {
        cand.sort_unstable();
        return m;
    }
    if l == 1 {
        let mut best = 0;
        for i in 1..m {
            if rank_cmp(w, cand[i], cand[best]) == Ordering::Less {
                best = i;
            }
        }
        cand.swap(0, best);
        return 1;
    }
    cand.select_nth_unstable_by(l - 1, |&a, &b| rank_cmp(w, a, b));
    cand[..l].sort_unstable();
    l
}

/// Largest `l` at which [`select_top_l`] uses the threshold scan rather than introselect.
pub const SCAN_MAX_L: usize = 32;

/// Threshold scan (Hughes thesis §7.1.2): keep the best `l` entries seen so far sorted by rank
/// in `best`, and insert an element only when it beats the current `l`-th (one comparison per
/// element in the common case). Scanning in index order, a later element beats an earlier one
/// only if its value is strictly larger under `total_cmp`, which is exactly [`rank_cmp`].
fn scan_top_l(w: &[f64], l: usize, best: &mut Vec<u32>) {
    best.clear();
    let mut thr = f64::NAN; // value of the current l-th entry (valid once best.len() == l)
    for (i, &v) in w.iter().enumerate() {
        let kv = key(v);
        if best.len() == l {
            if kv.total_cmp(&thr) != Ordering::Greater {
                continue;
            }
            best.pop();
        }
        // insertion position: after every entry with value >= kv (earlier index wins ties)
        let mut pos = best.len();
        while pos > 0 && key(w[best[pos - 1] as usize]).total_cmp(&kv) == Ordering::Less {
            pos -= 1;
        }
        best.insert(pos, i as u32);
        if best.len() == l {
            thr = key(w[best[l - 1] as usize]);
        }
    }
    best.sort_unstable();
}

/// Select the top-`l` clusters of row `w` into `idx` (ascending indices), using `scratch` (any
/// contents) as the candidate buffer: a threshold scan for `l ≤` [`SCAN_MAX_L`], introselect
/// otherwise (both linear in `K` for fixed `l`, no allocation once the buffers have grown).
/// Entries equal to `−∞` are dropped unless every weight of the row is `−∞` (then the first `l`
/// indices are kept, matching the dense kernel's uniform fallback). Returns the number of
/// selected clusters.
pub fn select_top_l(w: &[f64], l: usize, scratch: &mut Vec<u32>, idx: &mut Vec<u32>) -> usize {
    let k = w.len();
    if l <= SCAN_MAX_L || l >= k {
        scan_top_l(w, l.min(k), idx);
    } else {
        select_top_l_introselect(w, l, scratch, idx);
    }
    if idx.iter().any(|&i| key(w[i as usize]) > f64::NEG_INFINITY) {
        idx.retain(|&i| key(w[i as usize]) > f64::NEG_INFINITY);
    }
    idx.len()
}

/// Introselect variant of [`select_top_l`] (`select_nth_unstable_by` on an index buffer),
/// without the `−∞` filtering.
pub fn select_top_l_introselect(w: &[f64], l: usize, scratch: &mut Vec<u32>, idx: &mut Vec<u32>) {
    let k = w.len();
    scratch.clear();
    scratch.extend(0..k as u32);
    let m = select_top_among(w, scratch, l);
    idx.clear();
    idx.extend_from_slice(&scratch[..m]);
}

/// Reference selection by a full sort (tests only).
pub fn select_top_l_by_sort(w: &[f64], l: usize) -> Vec<u32> {
    let mut all: Vec<u32> = (0..w.len() as u32).collect();
    all.sort_by(|&a, &b| rank_cmp(w, a, b));
    all.truncate(l.min(w.len()));
    all.sort_unstable();
    if all.iter().any(|&i| key(w[i as usize]) > f64::NEG_INFINITY) {
        all.retain(|&i| key(w[i as usize]) > f64::NEG_INFINITY);
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 11) as f64) / ((1u64 << 53) as f64)
    }

    #[test]
    fn selection_matches_full_sort_with_ties_and_infinities() {
        let mut seed = 7u64;
        let mut scratch = Vec::new();
        let mut idx = Vec::new();
        for trial in 0..2000 {
            let k = 1 + (trial % 77);
            let w: Vec<f64> = (0..k)
                .map(|_| {
                    let u = lcg(&mut seed);
                    if u < 0.1 {
                        f64::NEG_INFINITY
                    } else if u < 0.15 {
                        if u < 0.125 {
                            0.0
                        } else {
                            -0.0
                        } // signed zeros
                    } else if u < 0.4 {
                        (u * 4.0).floor() // many ties
                    } else {
                        u * 100.0 - 50.0
                    }
                })
                .collect();
            for l in 1..=k + 2 {
                let want = select_top_l_by_sort(&w, l);
                // both algorithms return the same set (before the -inf filtering)
                let mut a = Vec::new();
                let mut b = Vec::new();
                scan_top_l(&w, l.min(k), &mut a);
                select_top_l_introselect(&w, l, &mut scratch, &mut b);
                assert_eq!(a, b, "scan vs introselect k={k} l={l} w={w:?}");
                let n = select_top_l(&w, l, &mut scratch, &mut idx);
                assert_eq!(idx, want, "k={k} l={l} w={w:?}");
                assert_eq!(n, want.len());
                // ascending, distinct, at most l
                assert!(idx.windows(2).all(|p| p[0] < p[1]));
                assert!(idx.len() <= l);
                // every selected weight >= every unselected weight
                let min_in = idx.iter().map(|&i| w[i as usize]).fold(f64::INFINITY, f64::min);
                for j in 0..k as u32 {
                    if !idx.contains(&j) && w[j as usize] > f64::NEG_INFINITY {
                        assert!(w[j as usize] <= min_in);
                    }
                }
            }
        }
    }

    #[test]
    fn ties_prefer_smaller_index_and_l1_is_argmax() {
        let w = [1.0, 3.0, 3.0, 2.0, 3.0];
        let mut s = Vec::new();
        let mut idx = Vec::new();
        select_top_l(&w, 1, &mut s, &mut idx);
        assert_eq!(idx, vec![1]);
        select_top_l(&w, 2, &mut s, &mut idx);
        assert_eq!(idx, vec![1, 2]);
        select_top_l(&w, 4, &mut s, &mut idx);
        assert_eq!(idx, vec![1, 2, 3, 4]);
    }

    #[test]
    fn nan_counts_as_minus_infinity_and_all_minus_inf_rows_keep_l() {
        let w = [f64::NAN, 0.5, f64::NEG_INFINITY];
        let mut s = Vec::new();
        let mut idx = Vec::new();
        select_top_l(&w, 3, &mut s, &mut idx);
        assert_eq!(idx, vec![1]);
        let w = [f64::NEG_INFINITY; 4];
        select_top_l(&w, 2, &mut s, &mut idx);
        assert_eq!(idx, vec![0, 1]);
    }

    #[test]
    fn shifting_a_row_keeps_the_set_and_the_responsibilities() {
        // adding c to every log weight of a row changes neither the selected
        // clusters nor their renormalised responsibilities; permuting the clusters (distinct
        // weights) permutes the selection
        let mut seed = 11u64;
        let mut s = Vec::new();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for trial in 0..500 {
            let k = 1 + (trial % 40);
            let w: Vec<f64> = (0..k).map(|_| lcg(&mut seed) * 60.0 - 30.0).collect();
            let c = (lcg(&mut seed) - 0.5) * 1e3;
            let ws: Vec<f64> = w.iter().map(|v| v + c).collect();
            for l in 1..=k {
                select_top_l(&w, l, &mut s, &mut a);
                select_top_l(&ws, l, &mut s, &mut b);
                assert_eq!(a, b, "k={k} l={l} c={c}");
                let pick = |w: &[f64], idx: &[u32]| -> Vec<f64> {
                    let sub: Vec<f64> = idx.iter().map(|&i| w[i as usize]).collect();
                    let mut r = vec![0.0; sub.len()];
                    crate::local::softmax_row(&sub, &mut r);
                    r
                };
                let (ra, rb) = (pick(&w, &a), pick(&ws, &b));
                for (x, y) in ra.iter().zip(&rb) {
                    assert!((x - y).abs() <= 1e-12, "k={k} l={l}: {x} vs {y}");
                }
                // reversed cluster order: index j becomes k-1-j
                let wr: Vec<f64> = w.iter().rev().cloned().collect();
                select_top_l(&wr, l, &mut s, &mut b);
                let mut back: Vec<u32> = b.iter().map(|&j| (k as u32) - 1 - j).collect();
                back.sort_unstable();
                assert_eq!(a, back, "k={k} l={l} reversed");
            }
        }
    }

    #[test]
    fn select_among_candidates() {
        let w = [5.0, 1.0, 4.0, 9.0, 0.0];
        let mut cand = vec![4, 2, 1, 0];
        let m = select_top_among(&w, &mut cand, 2);
        assert_eq!(m, 2);
        assert_eq!(&cand[..2], &[0, 2]);
    }
}
