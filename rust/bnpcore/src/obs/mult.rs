//! Multinomial (bag of words) with a Dirichlet prior (Hughes thesis §2.2.1, §3.6.2).
//!
//! `log F(x|β_k) = Σ_v x_v ln β_kv` (`h = 0`: probability of the token sequence).
//! Posterior `λ̂_kv = λ̄_v + S_kv`; `E_q[log F] = Σ_v x_v (ψ(λ̂_kv) − ψ(Σ_w λ̂_kw))` (one GEMM);
//! `c_Dir(λ) = ln Γ(Σλ) − Σ ln Γ(λ_v)`.

use ndarray::{Array1, Array2, ArrayD, ArrayView1, ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;

use super::{check_shape_finite, lin_sum_from_stats, FeatureMap, LogLikTable, ObsModel};
use crate::error::{Error, Result};
use crate::linalg::gemm;
use crate::special::{c_dir, digamma, gammaln, trigamma};

/// Multinomial observation model.
#[derive(Debug, Clone)]
pub struct Mult {
    lam: Array1<f64>,
    c0: f64,
    /// Per word `(ln Γ(λ̄_v), ψ(λ̄_v), ψ'(λ̄_v)/2)`: `ln Γ(λ̄_v + s)` for `s ≤ NEAR_PRIOR·λ̄_v` as
    /// `ln Γ(λ̄_v) + s (ψ(λ̄_v) + s ψ'(λ̄_v)/2)` ([`Mult::gammaln_post`]).
    near: Vec<[f64; 3]>,
    /// Per word the bound of the expansion: `NEAR_PRIOR·λ̄_v`, or −1 (never: every summary is
    /// above it) where `ψ'(λ̄_v)` overflows (`λ̄_v` below ~7.5e-155), whose `0 · ∞` would be NaN.
    near_thr: Vec<f64>,
    /// `Σ_v ln Γ(λ̄_v)` and `Σ_v λ̄_v` ([`Mult::c_post_pair_sparse`])
    near_sum: f64,
    lam_sum: f64,
}

/// What [`Mult::c_post_pairs`] computes once per topic taking part in pairs: its words above
/// the tiny threshold with `ln Γ, ψ, ψ'/2` of the topic's posterior there, and for the sparse
/// pair sum ([`Mult::c_post_pair_sparse`]) the row sum and, over the words *not* listed, the
/// first- and second-order terms of the expansion around the prior.
#[derive(Debug, Default)]
struct TopicValues {
    list: Vec<(usize, [f64; 3])>,
    /// every entry of the row is ≥ 0 (the sparse pair sum needs it)
    nonneg: bool,
    row_sum: f64,
    /// `Σ_{v not listed} x_v ψ(λ̄_v)` and `Σ_{v not listed} x_v² ψ'(λ̄_v)/2`
    lin: f64,
    quad: f64,
}

/// Smallest vocabulary for which a pair whose topics list fewer than half of the words between
/// them is summed over their lists ([`Mult::c_post_pair_sparse`]) rather than word by word.
const SPARSE_PAIR_MIN_V: usize = 64;

/// Summaries `S_kv ≤ NEAR_PRIOR · λ̄_v` take the second-order expansion of `ln Γ(λ̄_v + S_kv)`.
/// Its remainder `|ψ''(ξ)| S³/6 ≤ (2/λ̄³ + 1/λ̄²) S³/6 ≤ (2 + λ̄) · 10⁻¹⁸/6` is far below the
/// rounding of `ln Γ(λ̄_v)` itself; most `S_kv` of a topic model are that small (a topic's mass
/// on the words it does not use), so a Dirichlet log normaliser costs a few multiply-adds per
/// such word instead of a log-gamma.
const NEAR_PRIOR: f64 = 1e-6;

/// Largest number of per-topic values (word, `ln Γ`, `ψ`, `ψ'/2`: 32 bytes each) that
/// [`Mult::c_post_pairs`] computes at once (64 MiB).
const PAIR_VALUES_MAX: usize = 1 << 21;

/// Posterior Dirichlet parameters `λ̂` (`K × V`).
#[derive(Debug, Clone)]
pub struct MultPost {
    /// `λ̂_kv`
    pub lam: Array2<f64>,
}

/// Smoothed word distributions for k-means++ seeding.
#[derive(Debug, Clone)]
pub struct MultDivPrep {
    beta: Array2<f64>,
    log_beta: Array2<f64>,
    count: Array1<f64>,
    neg_ent: Array1<f64>,
}

impl Mult {
    /// Dirichlet prior with pseudo-counts `λ̄` (length `V`).
    ///
    /// # Errors
    /// Empty vocabulary or pseudo-counts that are not finite and positive.
    pub fn new(lam: Array1<f64>) -> Result<Self> {
        if lam.is_empty() {
            return Err(Error::shape("prior_count", "(V,) with V >= 1", "(0,)"));
        }
        if lam.iter().any(|&l| !(l > 0.0) || !l.is_finite()) {
            return Err(Error::param("prior_count", "Dirichlet pseudo-counts must be finite and > 0"));
        }
        let c0 = c_dir(lam.as_slice().expect("contiguous"));
        let near: Vec<[f64; 3]> = lam.iter().map(|&l| [gammaln(l), digamma(l), 0.5 * trigamma(l)]).collect();
        let near_thr = lam.iter().zip(&near).map(|(&l, n)| if n[2].is_finite() { NEAR_PRIOR * l } else { -1.0 }).collect();
        let near_sum = near.iter().map(|n| n[0]).sum();
        let lam_sum = lam.sum();
        Ok(Mult { lam, c0, near, near_thr, near_sum, lam_sum })
    }

    /// `ln Γ(λ̄_v + s)` for `s ≥ 0` ([`NEAR_PRIOR`]: the expansion for tiny `s`).
    #[inline]
    fn gammaln_post(&self, v: usize, s: f64) -> f64 {
        let [g, d1, d2] = self.near[v];
        if s <= self.near_thr[v] {
            g + s * (d1 + s * d2)
        } else {
            gammaln(s + self.lam[v])
        }
    }

    /// `c_Dir(λ̄ + s⁺)` of one summary row given word by word ([`Mult::gammaln_post`] for each
    /// word's log-gamma).
    fn c_post_row(&self, row: impl Iterator<Item = f64>) -> f64 {
        let (mut total, mut lg) = (0.0, 0.0);
        for (w, x) in row.enumerate() {
            let x = x.max(0.0);
            total += x + self.lam[w];
            lg += self.gammaln_post(w, x);
        }
        gammaln(total) - lg
    }

    /// `c_Dir(λ̄ + (S_a + S_b)⁺)` of every pair `(a[i], b[i])` of rows of `s`: the value of
    /// [`ObsModel::c_post_from_stats`] on the pooled rows, without pooling them and with far
    /// fewer log-gammas. A word where both summaries are tiny (at most `NEAR_PRIOR · λ̄_v`,
    /// the usual case) takes the expansion around the prior; a word where one is tiny, the
    /// second-order expansion `ln Γ(λ̂ + y) = ln Γ(λ̂) + y (ψ(λ̂) + y ψ'(λ̂)/2)` around the other
    /// topic's posterior `λ̂ = λ̄_v + x`, whose three values are computed once per topic and word
    /// (remainder `≤ (2/λ̂³ + 1/λ̂²)|y|³/6` with `|y| ≤ 10⁻⁶ λ̄_v ≤ 10⁻⁶ λ̂`: below round-off);
    /// only words where both are larger need a log-gamma of the pooled value.
    ///
    /// The per-topic values cost three special functions per word above the threshold, so
    /// they are computed only when the topics take part in several pairs each (planning);
    /// otherwise each pair pools its two rows word by word (one log-gamma per word whose
    /// pooled summary is above the threshold). With the per-topic values, a pair of
    /// non-negative rows whose lists hold fewer than half of the words between them (topics of
    /// a large vocabulary use a small part of it) is summed over the two lists only
    /// (`Mult::c_post_pair_sparse`; the same value to round-off): scoring every pair of 57
    /// topics over 16,172 words (gensim's Wikipedia sample) took 96 ms word by word and 40 ms so.
    pub fn c_post_pairs(&self, s: ArrayView2<f64>, a: &[usize], b: &[usize]) -> Vec<f64> {
        let k = s.nrows();
        let mut used = vec![false; k];
        for &t in a.iter().chain(b) {
            used[t] = true;
        }
        // the per-topic values are 32 bytes per word above the threshold: past a budget (dense
        // summaries at large K × V), pool word by word instead
        let above = || {
            (0..k)
                .into_par_iter()
                .filter(|&t| used[t])
                .map(|t| s.row(t).iter().enumerate().filter(|&(w, &x)| x > self.near_thr[w]).count())
                .sum::<usize>()
        };
        if 2 * a.len() < 3 * used.iter().filter(|&&u| u).count() || above() > PAIR_VALUES_MAX {
            return (0..a.len())
                .into_par_iter()
                .map(|i| self.c_post_row(s.row(a[i]).iter().zip(s.row(b[i]).iter()).map(|(&x, &y)| x + y)))
                .collect();
        }
        // per topic in a pair: its words above the tiny threshold, with ln Γ, ψ, ψ'/2 there
        let topics: Vec<TopicValues> =
            (0..k).into_par_iter().map(|t| if used[t] { self.topic_values(s.row(t)) } else { TopicValues::default() }).collect();
        let v = self.lam.len();
        (0..a.len())
            .into_par_iter()
            .map(|i| {
                let (ta, tb) = (&topics[a[i]], &topics[b[i]]);
                if v >= SPARSE_PAIR_MIN_V && ta.nonneg && tb.nonneg && 2 * (ta.list.len() + tb.list.len()) < v {
                    self.c_post_pair_sparse(s.row(a[i]), s.row(b[i]), ta, tb)
                } else {
                    self.c_post_pair(s.row(a[i]), s.row(b[i]), &ta.list, &tb.list)
                }
            })
            .collect()
    }

    /// [`TopicValues`] of one summary row.
    fn topic_values(&self, row: ArrayView1<f64>) -> TopicValues {
        let mut out = TopicValues { nonneg: true, ..TopicValues::default() };
        for (w, &x) in row.iter().enumerate() {
            out.nonneg &= x >= 0.0;
            out.row_sum += x;
            if x > self.near_thr[w] {
                let l = x + self.lam[w];
                out.list.push((w, [gammaln(l), digamma(l), 0.5 * trigamma(l)]));
            } else {
                let [_, d1, d2] = self.near[w];
                out.lin += x * d1;
                out.quad += x * x * d2;
            }
        }
        out
    }

    /// [`Mult::c_post_pair`] summed over the two topics' lists only, for rows without negative
    /// entries. A word listed by neither topic (both summaries at most `NEAR_PRIOR · λ̄_v`)
    /// contributes `ln Γ(λ̄_v) + (x + y) ψ(λ̄_v) + (x + y)² ψ'(λ̄_v)/2` to `Σ ln Γ`; all of it but
    /// the cross term `2xy ψ'(λ̄_v)/2` is a per-topic sum ([`TopicValues`]), so the pair starts
    /// from `Σ_v ln Γ(λ̄_v)` plus both topics' sums and corrects the words of the lists. The cross
    /// term is left out: at most `10⁻¹² λ̄_v² ψ'(λ̄_v) ≤ 10⁻¹²(1 + λ̄_v)` per word, below the
    /// round-off of the sum. Same value as the word-by-word sum to round-off (the order of the
    /// additions differs), at a cost that grows with the lists instead of the vocabulary.
    fn c_post_pair_sparse(&self, ra: ArrayView1<f64>, rb: ArrayView1<f64>, ta: &TopicValues, tb: &TopicValues) -> f64 {
        let (la, lb) = (&ta.list, &tb.list);
        let mut lg = self.near_sum + (ta.lin + tb.lin) + (ta.quad + tb.quad);
        let (mut i, mut j) = (0, 0);
        while i < la.len() || j < lb.len() {
            let wa = la.get(i).map_or(usize::MAX, |e| e.0);
            let wb = lb.get(j).map_or(usize::MAX, |e| e.0);
            let w = wa.min(wb);
            let [gp, d1p, d2p] = self.near[w];
            lg += if wa == wb {
                i += 1;
                j += 1;
                gammaln(ra[w] + rb[w] + self.lam[w]) - gp
            } else {
                // listed by one topic: the other's summary `y` is tiny, expanded around the
                // listing topic's posterior instead of the prior
                let ([g, d1, d2], y) = if wa < wb {
                    i += 1;
                    (la[i - 1].1, rb[w])
                } else {
                    j += 1;
                    (lb[j - 1].1, ra[w])
                };
                (g + y * (d1 + y * d2)) - (gp + y * (d1p + y * d2p))
            };
        }
        gammaln(ta.row_sum + tb.row_sum + self.lam_sum) - lg
    }

    fn c_post_pair(&self, ra: ArrayView1<f64>, rb: ArrayView1<f64>, la: &[(usize, [f64; 3])], lb: &[(usize, [f64; 3])]) -> f64 {
        let (mut ia, mut ib) = (0, 0);
        let (mut total, mut lg) = (0.0, 0.0);
        for (w, (&x, &y)) in ra.iter().zip(rb.iter()).enumerate() {
            let lam = self.lam[w];
            let sw = (x + y).max(0.0);
            total += sw + lam;
            let near = self.near_thr[w];
            let ea = (ia < la.len() && la[ia].0 == w).then(|| la[ia].1);
            let eb = (ib < lb.len() && lb[ib].0 == w).then(|| lb[ib].1);
            ia += usize::from(ea.is_some());
            ib += usize::from(eb.is_some());
            lg += match (ea, eb) {
                (None, None) if x.abs() <= near && y.abs() <= near => {
                    let [g, d1, d2] = self.near[w];
                    g + sw * (d1 + sw * d2)
                }
                (Some([g, d1, d2]), None) if y.abs() <= near => g + y * (d1 + y * d2),
                (None, Some([g, d1, d2])) if x.abs() <= near => g + x * (d1 + x * d2),
                _ => gammaln(sw + lam),
            };
        }
        gammaln(total) - lg
    }
}

impl ObsModel for Mult {
    type Post = MultPost;
    type DivPrep = MultDivPrep;

    fn kind(&self) -> &'static str {
        "mult"
    }
    fn n_features(&self) -> usize {
        self.lam.len()
    }
    fn stat_dim(&self) -> usize {
        self.lam.len()
    }
    fn check_data(&self, x: ArrayView2<f64>, name: &str) -> Result<()> {
        check_shape_finite(x, self.n_features(), name)?;
        if x.iter().any(|&v| v < 0.0) {
            return Err(Error::data(name, "word counts must be non-negative"));
        }
        if x.iter().any(|&v| v != v.round()) {
            return Err(Error::data(name, "word counts must be integers"));
        }
        Ok(())
    }
    fn check_sparse_values(&self, values: &[f64], name: &str) -> Result<()> {
        if values.iter().any(|&v| !v.is_finite()) {
            return Err(Error::NonFinite { what: format!("`{name}`") });
        }
        if values.iter().any(|&v| v < 0.0) {
            return Err(Error::data(name, "word counts must be non-negative"));
        }
        if values.iter().any(|&v| v != v.round()) {
            return Err(Error::data(name, "word counts must be integers"));
        }
        Ok(())
    }
    fn h_sum(&self, _x: ArrayView2<f64>) -> f64 {
        0.0
    }
    fn posterior(&self, _n: ArrayView1<f64>, s: ArrayView2<f64>) -> Result<MultPost> {
        // built element by element: row-major whatever the layout of `s` (c_post needs contiguous rows)
        let lam = Array2::from_shape_fn(s.dim(), |(k, v)| s[[k, v]].max(0.0) + self.lam[v]);
        Ok(MultPost { lam })
    }
    fn c_prior(&self) -> f64 {
        self.c0
    }
    fn c_post_from_stats(&self, _n: ArrayView1<f64>, s: ArrayView2<f64>) -> Result<Array1<f64>> {
        // `c_post(&posterior(n, s)?)` row by row in parallel (each row's arithmetic in a fixed
        // order, so the same bits for any thread count) without the K × V posterior: ELBOs and
        // merge scores call it with V in the thousands. The log-gammas of words with a tiny
        // summary use the expansion of [`Mult::gammaln_post`] (agrees with `c_post` to round-off).
        let per: Vec<f64> = (0..s.nrows()).into_par_iter().map(|k| self.c_post_row(s.row(k).iter().copied())).collect();
        Ok(Array1::from(per))
    }
    fn c_post(&self, post: &MultPost) -> Array1<f64> {
        Array1::from_iter(post.lam.rows().into_iter().map(|r| c_dir(r.as_slice().expect("contiguous"))))
    }
    fn e_log_lik_table(&self, post: &MultPost) -> LogLikTable {
        let k = post.lam.nrows();
        let mut w = post.lam.t().mapv(digamma);
        for j in 0..k {
            let tot = digamma(post.lam.row(j).sum());
            w.column_mut(j).mapv_inplace(|v| v - tot);
        }
        LogLikTable::Lin { feat: FeatureMap::Identity, w, cst: Array1::zeros(k) }
    }
    fn plugin_table(&self, post: &MultPost) -> Result<LogLikTable> {
        let k = post.lam.nrows();
        let mut w = post.lam.t().to_owned();
        for j in 0..k {
            let tot = post.lam.row(j).sum();
            w.column_mut(j).mapv_inplace(|v| (v / tot).ln());
        }
        Ok(LogLikTable::Lin { feat: FeatureMap::Identity, w, cst: Array1::zeros(k) })
    }
    fn feature_map(&self) -> FeatureMap {
        FeatureMap::Identity
    }
    fn summarize_block(&self, x: ArrayView2<f64>, resp: ArrayView2<f64>, s: ArrayViewMut2<f64>) {
        gemm(1.0, resp.t(), x, 1.0, s);
    }
    fn e_log_lik_sum_from_stats(&self, post: &MultPost, n: ArrayView1<f64>, s: ArrayView2<f64>) -> Array1<f64> {
        lin_sum_from_stats(&self.e_log_lik_table(post), n, s)
    }
    fn point_estimates(&self, post: &MultPost) -> Vec<(&'static str, ArrayD<f64>)> {
        let tot = post.lam.sum_axis(Axis(1)).insert_axis(Axis(1));
        vec![("means", (&post.lam / &tot).into_dyn())]
    }
    fn div_prepare(&self, x: ArrayView2<f64>) -> Result<MultDivPrep> {
        let count = x.sum_axis(Axis(1));
        let lam_tot = self.lam.sum();
        let mut beta = &x + &self.lam;
        for (mut r, &c) in beta.rows_mut().into_iter().zip(count.iter()) {
            r /= c + lam_tot;
        }
        let log_beta = beta.mapv(f64::ln);
        let neg_ent = (&beta * &log_beta).sum_axis(Axis(1));
        Ok(MultDivPrep { beta, log_beta, count, neg_ent })
    }
    fn div_to(&self, p: &MultDivPrep, i: usize, out: &mut [f64]) {
        let li = p.log_beta.row(i);
        out.par_iter_mut().enumerate().for_each(|(n, o)| {
            let cross = p.beta.row(n).dot(&li);
            *o = (p.count[n] * (p.neg_ent[n] - cross)).max(0.0);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Rng;

    /// The expansion agrees with the log-gamma of the rounded argument `fl(λ̄ + s)` up to that
    /// rounding (`|ψ| ulp(λ̄ + s)`) and the log-gamma's own (a wrong first- or second-order
    /// coefficient would be off by ~1e-7 or ~1e-13 at the threshold).
    #[test]
    fn near_prior_expansion_matches_gammaln() {
        for lam in [1e-3, 0.1, 0.5, 1.0, 2.0, 50.0, 3e4] {
            let m = Mult::new(Array1::from_elem(3, lam)).unwrap();
            for rel in [0.0, 1e-300, 1e-30, 1e-12, 1e-9, 3e-7, 9.99e-7, 1e-6, 1.01e-6, 1e-5, 1e-2, 0.7, 40.0] {
                let s = rel * lam;
                let got = m.gammaln_post(1, s);
                let want = gammaln(lam + s);
                let tol = digamma(lam + s).abs() * f64::EPSILON * (lam + s) + 4.0 * f64::EPSILON * want.abs().max(1.0);
                assert!((got - want).abs() <= tol, "λ̄={lam} s={s}: {got} vs {want} (tolerance {tol})");
            }
        }
    }

    /// The pair normalisers equal those of the pooled rows (`c_post` of `λ̄ + S_a + S_b`) to
    /// round-off, for summaries mixing zero, tiny, negative round-off and large entries (so
    /// every case of the word loop occurs), including a topic paired with itself.
    #[test]
    fn pair_normalisers_match_the_pooled_rows() {
        let mut rng = Rng(29);
        let v = 400;
        let prior = Array1::from_shape_fn(v, |_| 0.005 + rng.uniform());
        let m = Mult::new(prior).unwrap();
        let k = 8;
        let s = mixed_summaries(&mut rng, k, v);
        let (a, b): (Vec<usize>, Vec<usize>) = (0..k).flat_map(|i| (i..k).map(move |j| (i, j))).unzip();
        check_pairs(&m, &s, &a, &b, 1e-11); // many pairs: per-topic values
        check_pairs(&m, &s, &a[5..6], &b[5..6], 1e-11); // one pair: pooled word by word
    }

    /// The sparse pair sum (topics listing few words) against the pooled rows: directly, and
    /// through `c_post_pairs`, whose pairs take it when both rows are non-negative and list
    /// fewer than half the words between them (the last topic has a negative round-off entry
    /// and a dense support: its pairs are summed word by word).
    #[test]
    fn sparse_pair_normalisers_match_the_pooled_rows() {
        let mut rng = Rng(31);
        let v = 3000;
        for lam0 in [0.005, 0.1, 1.0] {
            let prior = Array1::from_shape_fn(v, |_| lam0 * (0.5 + rng.uniform()));
            let m = Mult::new(prior.clone()).unwrap();
            let k = 7;
            let mut s = Array2::from_shape_fn((k, v), |(t, w)| {
                let near = NEAR_PRIOR * prior[w];
                let listed = (w * 7 + t * 13) % 40 < 3 + t; // 7.5 % … 22.5 % of the words
                match (listed, (rng.uniform() * 4.0) as usize) {
                    (true, 0) => near * (1.0 + 1e-3 * rng.uniform()),
                    (true, _) => rng.uniform() * 30.0,
                    (false, 0) => 0.0,
                    (false, 1) => rng.uniform() * 1e-13,
                    _ => near * rng.uniform(),
                }
            });
            s.row_mut(k - 1).fill(2.0);
            s[[k - 1, 5]] = -1e-15;
            let topics: Vec<TopicValues> = (0..k).map(|t| m.topic_values(s.row(t))).collect();
            assert!(topics[..k - 1].iter().all(|t| t.nonneg && 8 * t.list.len() < 3 * v) && !topics[k - 1].nonneg);
            let (a, b): (Vec<usize>, Vec<usize>) = (0..k).flat_map(|i| (i..k).map(move |j| (i, j))).unzip();
            for (&x, &y) in a.iter().zip(&b).filter(|(&x, &y)| x < k - 1 && y < k - 1) {
                let pooled = (&s.row(x) + &s.row(y)).insert_axis(Axis(0));
                let want = m.c_post(&m.posterior(pooled.sum_axis(Axis(1)).view(), pooled.view()).unwrap())[0];
                let got = m.c_post_pair_sparse(s.row(x), s.row(y), &topics[x], &topics[y]);
                assert!((got - want).abs() <= 1e-12 * want.abs(), "λ̄ {lam0}, pair ({x}, {y}): {got} vs {want}");
            }
            check_pairs(&m, &s, &a, &b, 1e-12);
        }
    }

    /// `k × v` summaries mixing zeros, tiny values, negative round-off, values just past the
    /// expansion's threshold for most priors and large counts.
    fn mixed_summaries(rng: &mut Rng, k: usize, v: usize) -> Array2<f64> {
        Array2::from_shape_fn((k, v), |_| match (rng.uniform() * 6.0) as usize {
            0 => 0.0,
            1 => rng.uniform() * 1e-13,
            2 => -rng.uniform() * 1e-15,
            3 => rng.uniform() * 3e-6,
            _ => rng.uniform() * 20.0,
        })
    }

    /// `c_post_pairs` against `c_post` of the pooled rows, on both of its paths (per-topic
    /// values when the topics take part in several pairs each, pooling word by word otherwise).
    fn check_pairs(m: &Mult, s: &Array2<f64>, a: &[usize], b: &[usize], rtol: f64) {
        let got = m.c_post_pairs(s.view(), a, b);
        for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
            let pooled = (&s.row(x) + &s.row(y)).insert_axis(Axis(0));
            let n = pooled.sum_axis(Axis(1));
            let want = m.c_post(&m.posterior(n.view(), pooled.view()).unwrap())[0];
            assert!((got[i] - want).abs() <= rtol * want.abs().max(1.0), "pair ({x}, {y}) of {}: {} vs {want}", a.len(), got[i]);
        }
    }

    /// The same at the thresholds, on four words where the second-order terms of both
    /// expansions are ~1e-13 (the tolerance is 1e-14): one summary just below the threshold,
    /// the other just above it or below it.
    #[test]
    fn pair_normalisers_at_the_thresholds() {
        let lam = 0.005;
        let m = Mult::new(Array1::from_elem(4, lam)).unwrap();
        let t = NEAR_PRIOR * lam;
        let s = ndarray::array![
            [0.99 * t, 1.02 * t, 0.6 * t, 1.5 * t],
            [0.98 * t, 0.97 * t, 1.01 * t, 0.3],
            [0.0, 0.95 * t, 0.99 * t, 1.03 * t]
        ];
        let (a, b) = (vec![0, 0, 1, 0], vec![1, 2, 2, 0]);
        check_pairs(&m, &s, &a, &b, 1e-14);
        let (a3, b3) = (a.repeat(3), b.repeat(3));
        check_pairs(&m, &s, &a3, &b3, 1e-14);
    }

    /// `c_post_from_stats` (expansion for tiny summaries) equals `c_post` of the posterior to
    /// round-off, for summaries mixing tiny, zero, negative round-off and large entries, with
    /// a prior that varies by word.
    #[test]
    fn dirichlet_normalisers_from_stats_match_the_posterior() {
        let mut rng = Rng(17);
        let v = 500;
        let prior = Array1::from_shape_fn(v, |_| 0.01 + rng.uniform());
        let m = Mult::new(prior).unwrap();
        let s = mixed_summaries(&mut rng, 6, v);
        let n = s.sum_axis(Axis(1));
        let got = m.c_post_from_stats(n.view(), s.view()).unwrap();
        let want = m.c_post(&m.posterior(n.view(), s.view()).unwrap());
        for (g, w) in got.iter().zip(want.iter()) {
            assert!((g - w).abs() <= 1e-11 * w.abs().max(1.0), "{g} vs {w}");
        }
    }
}
