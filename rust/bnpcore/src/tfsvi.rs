//! Truncation-free stochastic variational inference (Wang & Blei, NIPS 2012): the locally
//! collapsed Gibbs step of one minibatch, for the HDP topic model (their supplement S.2) and the
//! DP mixture of multinomials (their §2.3), and the Antoniak table-count sampler.
//!
//! The global variational factors `q(φ_k) = Dir(λ_k)` and `q(π̄_k) = Beta(u_k, v_k)` of the
//! `T` components found so far act as the prior of a collapsed Gibbs sampler over the minibatch;
//! components beyond `T` are at their prior, so the sampler may open a new one at any time (no
//! truncation). The caller turns the final sample's counts into the stochastic update
//! `λ ← (1−ρ)λ + ρ(η + (D/S)·n)` (and likewise for `u`, `v`); see `bnpcore.algorithms.truncation_free`.
//!
//! **Representation of λ.** The caller keeps `λ_kw = η + scale · M_kw` (a scalar `scale` that
//! decays by `1 − ρ` at every step, so the decay of all of `λ` costs O(1)); the kernels read
//! `M` (T × V), `scale`, `η` and the row sums `M_k· = Σ_w M_kw`.
//!
//! **HDP minibatch** (per token `n` of document `d`, word `w`, with the token removed):
//!
//! ```text
//! p(k)   ∝ (n_dk + b π_k) (m_kw + λ_kw) / (m_k + Λ_k),   Λ_k = Σ_w λ_kw,  k < T
//! p(new) ∝ b π_new / V                                    (prior predictive η / (V η))
//! ```
//!
//! with `π` from sticks `π̄_k ~ Beta(u_k, v_k)` drawn at the start; a new topic gets
//! `λ = η 1`, `(u, v) = (1, a)` and a stick `π̄ ~ Beta(1, a)`. One sequential pass adds the
//! tokens one by one, then `n_sweeps` sweeps resample every token; after the initial pass and
//! after every sweep the table counts `s_dk ~ Antoniak(n_dk, b π_k)` and the sticks
//! `π̄_k ~ Beta(u_k + Σ_d s_dk, v_k + Σ_d Σ_{j>k} s_dj)` are resampled. The output is the last
//! sample: topic-word counts (as sparse triplets), table counts `Σ_d s_dk` and token counts
//! per topic. Topics opened in this minibatch that end empty are dropped.
//!
//! **DP-mixture minibatch** (documents are the atoms): with the other documents' assignments
//! `z_{−i}` of the minibatch added to the global factors,
//!
//! ```text
//! p(z_i = k) ∝ E[π_k | z_{−i}] · DirMult(x_i | λ_k + m_{k,−i}),  k < T'
//! p(new)     ∝ Π_{k<T'} E[1 − π̄_k | z_{−i}] · DirMult(x_i | η 1)
//! ```
//!
//! where `E[π_k | z_{−i}]` uses `Beta(u_k + n_k, v_k + n_{>k})` and `T'` counts the components
//! opened in this minibatch too (each with `(u, v) = (1, a)`). One sequential pass, then
//! `n_sweeps` sweeps; the output is the last sample's component-word counts and documents per
//! component.
//!
//! **Randomness and threads.** Everything random comes from [`Rng`] (xoshiro256++ seeded by
//! SplitMix64 from the caller's `seed`). The Gibbs sweeps are sequential — every token's
//! conditional depends on all other assignments of the minibatch, so no exact parallel order
//! exists — and parallel work only ever runs where it cannot change the result: the Antoniak
//! draws (one independent stream per document and round, integer sums) and, for the DP
//! mixture, the per-component log-likelihoods of a document (computed independently per
//! component). Results are therefore bit-identical for any number of threads.

use ndarray::{ArrayView1, ArrayView2};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::local::doc_topic::CsrIndex;
use crate::special::gammaln;

// ----------------------------------------------------------------------------- random numbers

/// SplitMix64 step (seeding and stream derivation).
#[inline]
fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// xoshiro256++ generator with the samplers the Gibbs steps need. Only `+`, `*`, `ln`, `cos`,
/// `sqrt` and `powf` of `f64` are used, so a Python reimplementation gives the same draws.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator whose state is four SplitMix64 outputs from `seed`.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let s = [splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x)];
        Rng { s }
    }

    /// An independent stream for `(seed, a, b)` (e.g. a round and a document).
    pub fn stream(seed: u64, a: u64, b: u64) -> Self {
        let mut x = seed;
        let h1 = splitmix64(&mut x);
        let mut y = h1 ^ a.wrapping_mul(0xD134_2543_DE82_EF95);
        let h2 = splitmix64(&mut y);
        let mut z = h2 ^ b.wrapping_mul(0xA076_1D64_78BD_642F);
        Rng::new(splitmix64(&mut z))
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform on [0, 1) with 53 random bits.
    #[inline]
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// Standard normal by Box–Muller (two uniforms per draw).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1]
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// `ln X` for `X ~ Gamma(shape, 1)`, `shape > 0` (Marsaglia & Tsang 2000; for
    /// `shape < 1`, `ln Gamma(shape + 1) + ln(U) / shape`). Returned in logs so that Beta draws
    /// with tiny parameters do not underflow.
    pub fn ln_gamma_variate(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            let g = self.ln_gamma_variate(shape + 1.0);
            let u = 1.0 - self.uniform(); // (0, 1]
            return g + u.ln() / shape;
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = 1.0 + c * x;
            if v <= 0.0 {
                continue;
            }
            let v3 = v * v * v;
            let u = self.uniform();
            if u < 1.0 - 0.0331 * (x * x) * (x * x) || (u > 0.0 && u.ln() < 0.5 * x * x + d * (1.0 - v3 + v3.ln())) {
                return d.ln() + v3.ln();
            }
        }
    }

    /// A draw of `Beta(a, b)` (`a, b > 0`) as `X / (X + Y)` of two Gamma variates, computed from
    /// their logarithms.
    pub fn beta(&mut self, a: f64, b: f64) -> f64 {
        let lx = self.ln_gamma_variate(a);
        let ly = self.ln_gamma_variate(b);
        1.0 / (1.0 + (ly - lx).exp())
    }

    /// Index `k` with probability `cum[k] − cum[k−1]` given the cumulative weights `cum`
    /// (last entry the total, > 0).
    #[inline]
    fn categorical(&mut self, cum: &[f64]) -> usize {
        let total = cum[cum.len() - 1];
        let x = self.uniform() * total;
        // first index whose cumulative weight exceeds x
        let k = cum.partition_point(|&c| c <= x);
        k.min(cum.len() - 1)
    }
}

/// A draw of the number of tables `s` that `n` customers occupy in a Chinese restaurant with
/// concentration `c` (the Antoniak distribution): `s = Σ_{i=1}^{n} Bernoulli(c / (c + i − 1))`,
/// with mean `Σ_{i=1}^{n} c / (c + i − 1)`. `n = 0` gives 0; `c` must be > 0.
pub fn antoniak(n: u64, c: f64, rng: &mut Rng) -> u64 {
    let mut s = 0;
    for i in 0..n {
        if rng.uniform() * (c + i as f64) < c {
            s += 1;
        }
    }
    s
}

// ----------------------------------------------------------------------------- shared input

/// The global factors of the `T` current components and the hyperparameters of one minibatch.
#[derive(Debug, Clone)]
pub struct TfParams {
    /// Topic-word Dirichlet prior `η > 0` (symmetric).
    pub eta: f64,
    /// Top-level concentration `a` (`γ`): new sticks are `Beta(1, a)`.
    pub gamma: f64,
    /// Document-level concentration `b` (`α`, HDP only).
    pub alpha: f64,
    /// Gibbs sweeps after the sequential initial pass.
    pub n_sweeps: usize,
    /// Seed of this minibatch's random stream.
    pub seed: u64,
}

/// The last sample of a minibatch, reduced to what the stochastic update needs.
#[derive(Debug, Clone, PartialEq)]
pub struct TfBatchOutput {
    /// Components after the minibatch: the `T` given ones, then the `n_new` opened here.
    pub n_components: usize,
    /// Components opened in this minibatch (and non-empty at the end).
    pub n_new: usize,
    /// Sparse component-word counts of the sample: `(component, word, count)`, sorted by
    /// component then word.
    pub topic: Vec<i64>,
    /// Word ids of the triplets.
    pub word: Vec<i64>,
    /// Counts of the triplets.
    pub count: Vec<f64>,
    /// Per component: HDP, table counts `Σ_d s_dk`; DP mixture, documents assigned.
    pub stick_counts: Vec<f64>,
    /// Per component: tokens assigned.
    pub tokens: Vec<f64>,
    /// Per document of the minibatch, the component of a DP mixture (empty for the HDP).
    pub assignments: Vec<i64>,
}

/// Validated minibatch: the tokens of each selected document, as (local word id, count).
struct Docs {
    /// word types per document: (local word index, count)
    types: Vec<Vec<(usize, u32)>>,
    /// global word id of each local word index
    vocab: Vec<usize>,
}

/// Most tokens one batch may hold: the sampler keeps a topic for every token (16 bytes each,
/// so 1 GB at this bound) and its time grows with the counts, where the other algorithms'
/// grows with the distinct words.
pub const MAX_BATCH_TOKENS: u64 = 1 << 26;

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn gather_docs<I: CsrIndex>(
    indptr: ArrayView1<I>,
    indices: ArrayView1<I>,
    data: ArrayView1<f64>,
    docs: ArrayView1<i64>,
    v: usize,
) -> Result<Docs> {
    let n_docs = indptr.len().checked_sub(1).ok_or_else(|| Error::shape("indptr", "(n_docs + 1,)", "(0,)"))?;
    let nnz = indices.len();
    if data.len() != nnz {
        return Err(Error::shape("data", format!("({nnz},) like `indices`"), format!("({},)", data.len())));
    }
    let mut local = std::collections::HashMap::<usize, usize>::new();
    let mut vocab = Vec::new();
    let mut types = Vec::with_capacity(docs.len());
    let mut total: u64 = 0;
    for &d in docs {
        let di = usize::try_from(d)
            .ok()
            .filter(|&x| x < n_docs)
            .ok_or_else(|| Error::data("docs", format!("document index {d} outside [0, {n_docs})")))?;
        let (a, b) = (indptr[di].checked(), indptr[di + 1].checked());
        let (a, b) = match (a, b) {
            (Some(a), Some(b)) if a <= b && b <= nnz => (a, b),
            _ => return Err(Error::data("indptr", format!("offsets of document {di} are not a valid range of the {nnz} entries"))),
        };
        let mut row = Vec::with_capacity(b - a);
        for j in a..b {
            let w = indices[j]
                .checked()
                .filter(|&w| w < v)
                .ok_or_else(|| Error::data("indices", format!("word ids must be in [0, n_vocab = {v}) (document {di})")))?;
            let c = data[j];
            if !(c >= 0.0) || !c.is_finite() || c.fract() != 0.0 || c > f64::from(u32::MAX) {
                return Err(Error::data("data", format!("word counts must be non-negative integers (document {di}, word {w}, count {c})")));
            }
            if c == 0.0 {
                continue;
            }
            let next = vocab.len();
            let l = *local.entry(w).or_insert(next);
            if l == next {
                vocab.push(w);
            }
            row.push((l, c as u32));
        }
        let doc_tokens: u64 = row.iter().map(|&(_, c)| u64::from(c)).sum();
        if doc_tokens > MAX_BATCH_TOKENS {
            return Err(Error::data(
                "data",
                format!(
                    "document {di} holds {doc_tokens} tokens; truncation-free SVI samples a topic for every token and takes at most \
                     {MAX_BATCH_TOKENS} per batch: use algorithm='memoized', whose cost grows with the distinct words, not the counts"
                ),
            ));
        }
        total += doc_tokens;
        if total > MAX_BATCH_TOKENS {
            return Err(Error::data(
                "data",
                format!(
                    "a batch of {} documents holds more than {MAX_BATCH_TOKENS} tokens; truncation-free SVI samples a topic for every \
                     token: lower `batch_size`, or use algorithm='memoized'",
                    docs.len()
                ),
            ));
        }
        types.push(row);
    }
    Ok(Docs { types, vocab })
}

/// Checked view of the global factors.
struct Globals<'a> {
    m: ArrayView2<'a, f64>,
    m_sum: &'a [f64],
    scale: f64,
    u: &'a [f64],
    v: &'a [f64],
}

fn check_globals<'a>(
    m: ArrayView2<'a, f64>,
    m_sum: &'a ArrayView1<'a, f64>,
    scale: f64,
    u: &'a ArrayView1<'a, f64>,
    v: &'a ArrayView1<'a, f64>,
    p: &TfParams,
) -> Result<Globals<'a>> {
    let t = m.nrows();
    let sl = |x: &'a ArrayView1<'a, f64>, name: &str| -> Result<&'a [f64]> {
        let s = x.as_slice().ok_or_else(|| Error::param(name, "must be a contiguous 1-D float64 array"))?;
        if s.len() != t {
            return Err(Error::shape(name, format!("({t},)"), format!("({},)", s.len())));
        }
        Ok(s)
    };
    let (m_sum, u, v) = (sl(m_sum, "mass_sum")?, sl(u, "u")?, sl(v, "v")?);
    // the entries of `mass` a minibatch reads are checked in `local_lambda` (O(words × T),
    // not O(V × T) per minibatch)
    if m_sum.iter().any(|&x| !(x >= 0.0) || !x.is_finite()) {
        return Err(Error::data("mass_sum", "topic masses must be finite and >= 0"));
    }
    if u.iter().chain(v).any(|&x| !(x > 0.0) || !x.is_finite()) {
        return Err(Error::param("u/v", "stick Beta parameters must be finite and > 0"));
    }
    if !(scale > 0.0) || !scale.is_finite() {
        return Err(Error::param("scale", format!("must be finite and > 0, got {scale}")));
    }
    for (name, x) in [("eta", p.eta), ("gamma", p.gamma), ("alpha", p.alpha)] {
        if !(x > 0.0) || !x.is_finite() {
            return Err(Error::param(name, format!("must be finite and > 0, got {x}")));
        }
    }
    Ok(Globals { m, m_sum, scale, u, v })
}

/// Per-component columns over the minibatch's local vocabulary, stored word-major
/// (`L × cap`) so that the conditional of one token reads one contiguous row; `cap` doubles
/// when components are opened.
struct WordTable {
    data: Vec<f64>,
    rows: usize,
    cols: usize,
    cap: usize,
}

impl WordTable {
    fn new(rows: usize, cols: usize, fill: f64) -> Self {
        let cap = (cols + 8).next_power_of_two();
        WordTable { data: vec![fill; rows * cap], rows, cols, cap }
    }
    #[inline]
    fn row(&self, l: usize) -> &[f64] {
        &self.data[l * self.cap..l * self.cap + self.cols]
    }
    #[inline]
    fn at(&mut self, l: usize, k: usize) -> &mut f64 {
        &mut self.data[l * self.cap + k]
    }
    /// Append a column with `fill` in every row.
    fn push_col(&mut self, fill: f64) {
        if self.cols == self.cap {
            let cap = self.cap * 2;
            let mut data = vec![0.0; self.rows * cap];
            for l in 0..self.rows {
                data[l * cap..l * cap + self.cols].copy_from_slice(&self.data[l * self.cap..l * self.cap + self.cols]);
            }
            self.data = data;
            self.cap = cap;
        }
        for l in 0..self.rows {
            self.data[l * self.cap + self.cols] = fill;
        }
        self.cols += 1;
    }
}

/// Local λ table (word-major) and Λ_k of the `T` global components; every mass entry read
/// must be finite and >= 0.
fn local_lambda(g: &Globals, vocab: &[usize], p: &TfParams, v: usize) -> Result<(WordTable, Vec<f64>)> {
    let t = g.m.nrows();
    let mut lam = WordTable::new(vocab.len(), t, p.eta);
    for (l, &w) in vocab.iter().enumerate() {
        for k in 0..t {
            let x = g.m[[k, w]];
            if !(x >= 0.0) || !x.is_finite() {
                return Err(Error::data("mass", format!("topic-word masses must be finite and >= 0 (component {k}, word {w}: {x})")));
            }
            *lam.at(l, k) = p.eta + g.scale * x;
        }
    }
    let vf = v as f64;
    let lam_sum = (0..t).map(|k| vf * p.eta + g.scale * g.m_sum[k]).collect();
    Ok((lam, lam_sum))
}

/// Sparse triplets of a local count table (components `keep`, renumbered in order).
fn triplets(counts: &WordTable, vocab: &[usize], keep: &[usize]) -> (Vec<i64>, Vec<i64>, Vec<f64>) {
    let mut order: Vec<usize> = (0..vocab.len()).collect();
    order.sort_unstable_by_key(|&l| vocab[l]);
    let (mut tk, mut tw, mut tc) = (Vec::new(), Vec::new(), Vec::new());
    for (new_k, &k) in keep.iter().enumerate() {
        for &l in &order {
            let c = counts.row(l)[k];
            if c > 0.0 {
                tk.push(new_k as i64);
                tw.push(vocab[l] as i64);
                tc.push(c);
            }
        }
    }
    (tk, tw, tc)
}

/// Stick means `π_k = π̄_k Π_{l<k}(1 − π̄_l)` and the rest `Π_k (1 − π̄_k)`.
fn sticks_to_pi(pibar: &[f64]) -> (Vec<f64>, f64) {
    let mut rest = 1.0;
    let mut pi = Vec::with_capacity(pibar.len());
    for &b in pibar {
        pi.push(rest * b);
        rest *= 1.0 - b;
    }
    (pi, rest)
}

// ----------------------------------------------------------------------------- HDP

/// One minibatch of truncation-free SVI for the HDP topic model (module docs): documents
/// `docs` (row indices) of the CSR corpus `(indptr, indices, data)` with `V = mass.ncols()`
/// words, global factors `λ = η + scale · mass` (T × V, row sums `mass_sum`) and sticks
/// `Beta(u_k, v_k)`.
pub fn hdp_batch<I: CsrIndex>(
    indptr: ArrayView1<I>,
    indices: ArrayView1<I>,
    data: ArrayView1<f64>,
    docs: ArrayView1<i64>,
    mass: ArrayView2<f64>,
    mass_sum: ArrayView1<f64>,
    scale: f64,
    u: ArrayView1<f64>,
    v: ArrayView1<f64>,
    p: &TfParams,
) -> Result<TfBatchOutput> {
    let n_vocab = mass.ncols();
    if n_vocab == 0 {
        return Err(Error::shape("mass", "(n_components, n_vocab) with n_vocab >= 1", format!("{:?}", mass.dim())));
    }
    let g = check_globals(mass, &mass_sum, scale, &u, &v, p)?;
    let batch = gather_docs(indptr, indices, data, docs, n_vocab)?;
    let t0 = g.m.nrows();
    let (lam, mut lam_sum) = local_lambda(&g, &batch.vocab, p, n_vocab)?;
    let mut lam = lam;
    let mut rng = Rng::new(p.seed);
    let (b, vf) = (p.alpha, n_vocab as f64);

    // sticks of the T components, then per-token state
    let mut su: Vec<f64> = g.u.to_vec();
    let mut sv: Vec<f64> = g.v.to_vec();
    let mut pibar: Vec<f64> = (0..t0).map(|k| rng.beta(su[k], sv[k])).collect();
    let (mut pi, mut pi_new) = sticks_to_pi(&pibar);
    let mut counts = WordTable::new(batch.vocab.len(), t0, 0.0); // m_kw
    let mut m_k = vec![0.0f64; t0];
    let n_docs = batch.types.len();
    let tokens: Vec<Vec<usize>> =
        batch.types.iter().map(|row| row.iter().flat_map(|&(l, c)| std::iter::repeat_n(l, c as usize)).collect()).collect();
    let mut z: Vec<Vec<usize>> = tokens.iter().map(|t| vec![usize::MAX; t.len()]).collect();
    let mut n_dk: Vec<Vec<f64>> = vec![vec![0.0; t0]; n_docs];
    let mut cum: Vec<f64> = Vec::with_capacity(t0 + 1);
    let mut inv_den: Vec<f64> = (0..t0).map(|k| 1.0 / (m_k[k] + lam_sum[k])).collect();

    let rounds = p.n_sweeps + 1;
    let mut tables = vec![0.0f64; t0];
    for round in 0..rounds {
        for d in 0..n_docs {
            let nd = &mut n_dk[d];
            for (n, &l) in tokens[d].iter().enumerate() {
                let old = z[d][n];
                if old != usize::MAX {
                    nd[old] -= 1.0;
                    *counts.at(l, old) -= 1.0;
                    m_k[old] -= 1.0;
                    inv_den[old] = 1.0 / (m_k[old] + lam_sum[old]);
                }
                let t = pi.len();
                if nd.len() < t {
                    nd.resize(t, 0.0);
                }
                cum.clear();
                let (lrow, crow) = (lam.row(l), counts.row(l));
                let mut acc = 0.0;
                for k in 0..t {
                    acc += (nd[k] + b * pi[k]) * (crow[k] + lrow[k]) * inv_den[k];
                    cum.push(acc);
                }
                acc += b * pi_new / vf;
                cum.push(acc);
                let mut k = rng.categorical(&cum);
                if k == t {
                    // open a new topic at its prior, with a fresh stick
                    lam.push_col(p.eta);
                    counts.push_col(0.0);
                    lam_sum.push(vf * p.eta);
                    m_k.push(0.0);
                    inv_den.push(1.0 / (vf * p.eta));
                    su.push(1.0);
                    sv.push(p.gamma);
                    let nb = rng.beta(1.0, p.gamma);
                    pibar.push(nb);
                    pi.push(pi_new * nb);
                    pi_new *= 1.0 - nb;
                    tables.push(0.0);
                    nd.resize(t + 1, 0.0);
                    k = t;
                }
                nd[k] += 1.0;
                *counts.at(l, k) += 1.0;
                m_k[k] += 1.0;
                inv_den[k] = 1.0 / (m_k[k] + lam_sum[k]);
                z[d][n] = k;
            }
        }
        // table counts (parallel over documents, one stream per document and round)
        let t = pi.len();
        let bpi: Vec<f64> = pi.iter().map(|&x| b * x).collect();
        let draw = |(d, nd): (usize, &Vec<f64>)| -> Vec<f64> {
            let mut r = Rng::stream(p.seed, round as u64 + 1, d as u64);
            (0..t)
                .map(|k| {
                    let n = nd.get(k).copied().unwrap_or(0.0);
                    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                    let s = antoniak(n as u64, bpi[k].max(f64::MIN_POSITIVE), &mut r);
                    s as f64
                })
                .collect()
        };
        // one stream per document: the same draws sequentially or in parallel
        let per_doc: Vec<Vec<f64>> = if n_docs >= PAR_MIN_DOCS {
            n_dk.par_iter().enumerate().map(draw).collect()
        } else {
            n_dk.iter().enumerate().map(draw).collect()
        };
        tables = vec![0.0; t];
        for row in &per_doc {
            for k in 0..t {
                tables[k] += row[k];
            }
        }
        // sticks given the table counts
        let mut above: f64 = tables.iter().sum();
        for k in 0..t {
            above -= tables[k];
            pibar[k] = rng.beta(su[k] + tables[k], sv[k] + above.max(0.0));
        }
        let (p2, r2) = sticks_to_pi(&pibar);
        pi = p2;
        pi_new = r2;
    }

    // keep the given components and the non-empty new ones
    let t = pi.len();
    let keep: Vec<usize> = (0..t).filter(|&k| k < t0 || m_k[k] > 0.0).collect();
    let (topic, word, count) = triplets(&counts, &batch.vocab, &keep);
    Ok(TfBatchOutput {
        n_components: keep.len(),
        n_new: keep.len() - t0,
        topic,
        word,
        count,
        stick_counts: keep.iter().map(|&k| tables[k]).collect(),
        tokens: keep.iter().map(|&k| m_k[k]).collect(),
        assignments: Vec::new(),
    })
}

// ----------------------------------------------------------------------------- DP mixture

/// `ln Γ(x + c) − ln Γ(x)` for an integer count `c` (a sum of logs for small counts).
#[inline]
fn rising_log(x: f64, c: u32) -> f64 {
    match c {
        0 => 0.0,
        1 => x.ln(),
        2 => (x * (x + 1.0)).ln(),
        3..=8 => {
            let mut prod = x;
            for j in 1..c {
                prod *= x + f64::from(j);
            }
            prod.ln()
        }
        _ => gammaln(x + f64::from(c)) - gammaln(x),
    }
}

/// Minibatches with fewer documents draw their table counts on the calling thread (the draws
/// are the same either way; a tiny minibatch costs less than waking the pool).
pub const PAR_MIN_DOCS: usize = 16;

/// Components per parallel chunk of a document's log-likelihoods.
const DP_CHUNK: usize = 64;

/// One minibatch of truncation-free SVI for the DP mixture of multinomials (module docs):
/// documents `docs` of the CSR corpus, global factors as for [`hdp_batch`] (`alpha` unused).
pub fn dp_mult_batch<I: CsrIndex>(
    indptr: ArrayView1<I>,
    indices: ArrayView1<I>,
    data: ArrayView1<f64>,
    docs: ArrayView1<i64>,
    mass: ArrayView2<f64>,
    mass_sum: ArrayView1<f64>,
    scale: f64,
    u: ArrayView1<f64>,
    v: ArrayView1<f64>,
    p: &TfParams,
) -> Result<TfBatchOutput> {
    let n_vocab = mass.ncols();
    if n_vocab == 0 {
        return Err(Error::shape("mass", "(n_components, n_vocab) with n_vocab >= 1", format!("{:?}", mass.dim())));
    }
    let g = check_globals(mass, &mass_sum, scale, &u, &v, p)?;
    let batch = gather_docs(indptr, indices, data, docs, n_vocab)?;
    let t0 = g.m.nrows();
    let (lam, mut lam_sum) = local_lambda(&g, &batch.vocab, p, n_vocab)?;
    let mut lam = lam;
    let mut rng = Rng::new(p.seed);
    let vf = n_vocab as f64;
    let n_docs = batch.types.len();
    let lens: Vec<f64> = batch.types.iter().map(|r| r.iter().map(|&(_, c)| f64::from(c)).sum()).collect();
    // ln DirMult(x_i | η 1) without the multinomial coefficient
    let new_ll: Vec<f64> = batch
        .types
        .iter()
        .zip(&lens)
        .map(|(row, &n)| gammaln(vf * p.eta) - gammaln(vf * p.eta + n) + row.iter().map(|&(_, c)| rising_log(p.eta, c)).sum::<f64>())
        .collect();

    let mut su: Vec<f64> = g.u.to_vec();
    let mut sv: Vec<f64> = g.v.to_vec();
    let mut counts = WordTable::new(batch.vocab.len(), t0, 0.0);
    let mut m_k = vec![0.0f64; t0]; // tokens per component in the batch
    let mut n_k = vec![0.0f64; t0]; // documents per component in the batch
    let mut z = vec![usize::MAX; n_docs];
    let mut logp: Vec<f64> = Vec::new();
    let mut cum: Vec<f64> = Vec::new();

    for _round in 0..=p.n_sweeps {
        for i in 0..n_docs {
            let row = &batch.types[i];
            if z[i] != usize::MAX {
                let old = z[i];
                for &(l, c) in row {
                    *counts.at(l, old) -= f64::from(c);
                }
                m_k[old] -= lens[i];
                n_k[old] -= 1.0;
            }
            let t = su.len();
            // log E[π_k | z_-i] and the rest, sequentially (a prefix product)
            let mut stick = Vec::with_capacity(t);
            let mut rest_log = 0.0;
            let mut above: f64 = n_k.iter().sum();
            for k in 0..t {
                above -= n_k[k];
                let (a1, b1) = (su[k] + n_k[k], sv[k] + above.max(0.0));
                stick.push(rest_log + (a1 / (a1 + b1)).ln());
                rest_log += (b1 / (a1 + b1)).ln();
            }
            // per-component log-likelihoods, independent per component
            logp.clear();
            logp.resize(t, 0.0);
            let (lam_r, counts_r, lam_sum_r, m_k_r, len_i) = (&lam, &counts, &lam_sum, &m_k, lens[i]);
            let ll = |k: usize| -> f64 {
                let tot = lam_sum_r[k] + m_k_r[k];
                let mut s = gammaln(tot) - gammaln(tot + len_i);
                for &(l, c) in row {
                    s += rising_log(lam_r.row(l)[k] + counts_r.row(l)[k], c);
                }
                s
            };
            if t * row.len() >= 4096 {
                logp.par_chunks_mut(DP_CHUNK).enumerate().for_each(|(ci, chunk)| {
                    for (j, out) in chunk.iter_mut().enumerate() {
                        *out = ll(ci * DP_CHUNK + j);
                    }
                });
            } else {
                for (k, out) in logp.iter_mut().enumerate() {
                    *out = ll(k);
                }
            }
            for k in 0..t {
                logp[k] += stick[k];
            }
            logp.push(rest_log + new_ll[i]);
            let mx = logp.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            cum.clear();
            let mut acc = 0.0;
            for &x in &logp {
                acc += (x - mx).exp();
                cum.push(acc);
            }
            let mut k = rng.categorical(&cum);
            if k == t {
                lam.push_col(p.eta);
                counts.push_col(0.0);
                lam_sum.push(vf * p.eta);
                m_k.push(0.0);
                n_k.push(0.0);
                su.push(1.0);
                sv.push(p.gamma);
                k = t;
            }
            for &(l, c) in row {
                *counts.at(l, k) += f64::from(c);
            }
            m_k[k] += lens[i];
            n_k[k] += 1.0;
            z[i] = k;
        }
    }
    let t = su.len();
    let keep: Vec<usize> = (0..t).filter(|&k| k < t0 || n_k[k] > 0.0).collect();
    let mut renum = vec![usize::MAX; t];
    for (j, &k) in keep.iter().enumerate() {
        renum[k] = j;
    }
    let (topic, word, count) = triplets(&counts, &batch.vocab, &keep);
    Ok(TfBatchOutput {
        n_components: keep.len(),
        n_new: keep.len() - t0,
        topic,
        word,
        count,
        stick_counts: keep.iter().map(|&k| n_k[k]).collect(),
        tokens: keep.iter().map(|&k| m_k[k]).collect(),
        assignments: z.iter().map(|&k| renum[k] as i64).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array1, Array2};

    #[test]
    fn antoniak_mean_matches() {
        let mut rng = Rng::new(7);
        for &(n, c) in &[(1u64, 0.3), (10, 1.0), (50, 0.05), (200, 7.5)] {
            let draws = 20_000;
            let mean: f64 = (0..draws).map(|_| antoniak(n, c, &mut rng) as f64).sum::<f64>() / f64::from(draws);
            let expect: f64 = (1..=n).map(|i| c / (c + i as f64 - 1.0)).sum();
            let var: f64 = (1..=n)
                .map(|i| {
                    let p = c / (c + i as f64 - 1.0);
                    p * (1.0 - p)
                })
                .sum();
            let se = (var / f64::from(draws)).sqrt();
            assert!((mean - expect).abs() <= 5.0 * se + 1e-12, "n={n} c={c}: {mean} vs {expect} (se {se})");
        }
        assert_eq!(antoniak(0, 2.0, &mut rng), 0);
    }

    #[test]
    fn beta_mean_matches() {
        let mut rng = Rng::new(3);
        for &(a, b) in &[(1.0, 1.0), (0.05, 2.0), (30.0, 0.5), (1e-3, 1e-3)] {
            let n = 40_000;
            let mean: f64 = (0..n).map(|_| rng.beta(a, b)).sum::<f64>() / f64::from(n);
            let var = a * b / ((a + b) * (a + b) * (a + b + 1.0));
            let se = (var / f64::from(n)).sqrt();
            assert!((mean - a / (a + b)).abs() < 5.0 * se + 1e-9, "Beta({a},{b}) mean {mean}");
        }
    }

    fn toy() -> (Array1<i64>, Array1<i64>, Array1<f64>) {
        // 4 documents over 6 words: two "bars"
        let indptr = Array1::from(vec![0i64, 3, 6, 9, 12]);
        let indices = Array1::from(vec![0i64, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5]);
        let data = Array1::from(vec![5.0, 4.0, 6.0, 3.0, 7.0, 5.0, 6.0, 4.0, 5.0, 5.0, 5.0, 5.0]);
        (indptr, indices, data)
    }

    #[test]
    fn hdp_from_zero_opens_topics_and_conserves_tokens() {
        let (ip, ind, dat) = toy();
        let docs = Array1::from(vec![0i64, 1, 2, 3]);
        let m = Array2::<f64>::zeros((0, 6));
        let e = Array1::<f64>::zeros(0);
        let p = TfParams { eta: 0.01, gamma: 1.0, alpha: 1.0, n_sweeps: 5, seed: 11 };
        let out = hdp_batch(ip.view(), ind.view(), dat.view(), docs.view(), m.view(), e.view(), 1.0, e.view(), e.view(), &p).unwrap();
        assert!(out.n_components >= 1 && out.n_new == out.n_components);
        assert_eq!(out.count.iter().sum::<f64>(), dat.sum());
        assert_eq!(out.tokens.iter().sum::<f64>(), dat.sum());
        assert!(out.stick_counts.iter().all(|&s| s >= 1.0));
        let again = hdp_batch(ip.view(), ind.view(), dat.view(), docs.view(), m.view(), e.view(), 1.0, e.view(), e.view(), &p).unwrap();
        assert_eq!(out, again);
    }

    #[test]
    fn dp_from_zero_assigns_every_document() {
        let (ip, ind, dat) = toy();
        let docs = Array1::from(vec![3i64, 0, 2, 1]);
        let m = Array2::<f64>::zeros((0, 6));
        let e = Array1::<f64>::zeros(0);
        let p = TfParams { eta: 0.5, gamma: 1.0, alpha: 1.0, n_sweeps: 3, seed: 5 };
        let out = dp_mult_batch(ip.view(), ind.view(), dat.view(), docs.view(), m.view(), e.view(), 1.0, e.view(), e.view(), &p).unwrap();
        assert_eq!(out.stick_counts.iter().sum::<f64>(), 4.0);
        assert_eq!(out.assignments.len(), 4);
        assert!(out.assignments.iter().all(|&k| (k as usize) < out.n_components));
        assert_eq!(out.count.iter().sum::<f64>(), dat.sum());
    }

    #[test]
    fn bad_counts_are_errors() {
        let (ip, ind, mut dat) = toy();
        dat[2] = 1.5;
        let docs = Array1::from(vec![0i64]);
        let m = Array2::<f64>::zeros((0, 6));
        let e = Array1::<f64>::zeros(0);
        let p = TfParams { eta: 0.5, gamma: 1.0, alpha: 1.0, n_sweeps: 1, seed: 5 };
        assert!(matches!(
            hdp_batch(ip.view(), ind.view(), dat.view(), docs.view(), m.view(), e.view(), 1.0, e.view(), e.view(), &p),
            Err(Error::InvalidData { .. })
        ));
        let docs = Array1::from(vec![9i64]);
        assert!(dp_mult_batch(ip.view(), ind.view(), dat.view(), docs.view(), m.view(), e.view(), 1.0, e.view(), e.view(), &p).is_err());
    }
}
