"""Slow, obviously-correct reference of the truncation-free SVI minibatch step (Wang & Blei
2012) and of its random generator, written from the formulas in ``docs/truncation_free.md``
with plain Python loops. It re-implements the generator (SplitMix64 seeding, xoshiro256++,
Box–Muller, Marsaglia–Tsang) so that, given the same seed, it draws the same random numbers as
the Rust kernels and its samples can be compared exactly. Never calls ``bnpcore._core``.
"""

from __future__ import annotations

import math

import numpy as np

MASK = (1 << 64) - 1


def _splitmix(x: int) -> tuple[int, int]:
    x = (x + 0x9E3779B97F4A7C15) & MASK
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return x, z ^ (z >> 31)


def _rotl(x: int, k: int) -> int:
    return ((x << k) | (x >> (64 - k))) & MASK


class RefRng:
    """xoshiro256++ seeded by four SplitMix64 outputs."""

    def __init__(self, seed: int):
        x = seed & MASK
        s = []
        for _ in range(4):
            x, z = _splitmix(x)
            s.append(z)
        self.s = s

    @classmethod
    def stream(cls, seed: int, a: int, b: int) -> RefRng:
        _x, h1 = _splitmix(seed & MASK)
        y = h1 ^ ((a * 0xD1342543DE82EF95) & MASK)
        y, h2 = _splitmix(y)
        z = h2 ^ ((b * 0xA0761D6478BD642F) & MASK)
        z, h3 = _splitmix(z)
        return cls(h3)

    def next_u64(self) -> int:
        s = self.s
        result = (_rotl((s[0] + s[3]) & MASK, 23) + s[0]) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        return result

    def uniform(self) -> float:
        return (self.next_u64() >> 11) * (1.0 / 9007199254740992.0)

    def normal(self) -> float:
        u1 = 1.0 - self.uniform()
        u2 = self.uniform()
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)

    def ln_gamma_variate(self, shape: float) -> float:
        if shape < 1.0:
            g = self.ln_gamma_variate(shape + 1.0)
            u = 1.0 - self.uniform()
            return g + math.log(u) / shape
        d = shape - 1.0 / 3.0
        c = 1.0 / math.sqrt(9.0 * d)
        while True:
            x = self.normal()
            v = 1.0 + c * x
            if v <= 0.0:
                continue
            v3 = v * v * v
            u = self.uniform()
            if u < 1.0 - 0.0331 * (x * x) * (x * x) or (u > 0.0 and math.log(u) < 0.5 * x * x + d * (1.0 - v3 + math.log(v3))):
                return math.log(d) + math.log(v3)

    def beta(self, a: float, b: float) -> float:
        lx = self.ln_gamma_variate(a)
        ly = self.ln_gamma_variate(b)
        return 1.0 / (1.0 + math.exp(ly - lx))

    def categorical(self, weights) -> int:
        """Inverse-CDF draw from unnormalised weights (cumulated left to right)."""
        cum = []
        acc = 0.0
        for w in weights:
            acc += w
            cum.append(acc)
        x = self.uniform() * acc
        for k, c in enumerate(cum):
            if c > x:
                return k
        return len(cum) - 1


def antoniak(n: int, c: float, rng: RefRng) -> int:
    """Tables of ``n`` customers with concentration ``c``: Σ_i Bernoulli(c / (c + i − 1))."""
    s = 0
    for i in range(int(n)):
        if rng.uniform() * (c + i) < c:
            s += 1
    return s


def _docs(X, docs):
    """[(word, count), ...] per selected document, zero counts dropped, CSR order."""
    out = []
    for d in docs:
        a, b = int(X.indptr[d]), int(X.indptr[d + 1])
        out.append([(int(w), int(c)) for w, c in zip(X.indices[a:b], X.data[a:b]) if c > 0])
    return out


def _vocab_order(types):
    """Local word ids in order of first appearance (as the kernel numbers them)."""
    order = {}
    for row in types:
        for w, _ in row:
            order.setdefault(w, len(order))
    return order


def _sticks(pibar):
    pi, rest = [], 1.0
    for b in pibar:
        pi.append(rest * b)
        rest *= 1.0 - b
    return pi, rest


def _result(counts, keep, stick_counts, tokens, assignments):
    trip = sorted((nk, w, c) for nk, k in enumerate(keep) for w, c in counts[k].items() if c > 0)
    return {
        "n_components": len(keep),
        "topic": np.array([t[0] for t in trip], dtype=np.int64),
        "word": np.array([t[1] for t in trip], dtype=np.int64),
        "count": np.array([t[2] for t in trip], dtype=np.float64),
        "stick_counts": np.array([stick_counts[k] for k in keep], dtype=np.float64),
        "tokens": np.array([tokens[k] for k in keep], dtype=np.float64),
        "assignments": np.asarray(assignments, dtype=np.int64),
    }


def hdp_batch(X, docs, mass, mass_sum, scale, u, v, *, eta, gamma, alpha, n_sweeps, seed):
    """Reference HDP minibatch: ``X`` CSR counts, topics ``λ = eta + scale · mass`` (T × V)
    with row sums ``mass_sum``."""
    rng = RefRng(seed)
    T0, V = mass.shape
    types = _docs(X, docs)

    def lam_of(k, w):
        return eta + scale * float(mass[k, w]) if k < T0 else eta

    lam_sum = [V * eta + scale * float(mass_sum[k]) for k in range(T0)]
    su, sv = list(map(float, u)), list(map(float, v))
    pibar = [rng.beta(su[k], sv[k]) for k in range(T0)]
    pi, pi_new = _sticks(pibar)
    counts = [dict() for _ in range(T0)]
    m_k = [0.0] * T0
    tokens = [[w for w, c in row for _ in range(c)] for row in types]
    z = [[None] * len(t) for t in tokens]
    n_dk = [[0.0] * T0 for _ in types]
    tables = [0.0] * T0
    b = alpha
    for rnd in range(n_sweeps + 1):
        for d, toks in enumerate(tokens):
            nd = n_dk[d]
            for n, w in enumerate(toks):
                old = z[d][n]
                if old is not None:
                    nd[old] -= 1.0
                    counts[old][w] -= 1.0
                    m_k[old] -= 1.0
                T = len(pi)
                nd.extend([0.0] * (T - len(nd)))
                weights = [(nd[k] + b * pi[k]) * (counts[k].get(w, 0.0) + lam_of(k, w)) * (1.0 / (m_k[k] + lam_sum[k])) for k in range(T)]
                weights.append(b * pi_new / V)
                k = rng.categorical(weights)
                if k == T:
                    counts.append({})
                    lam_sum.append(V * eta)
                    m_k.append(0.0)
                    su.append(1.0)
                    sv.append(gamma)
                    nb = rng.beta(1.0, gamma)
                    pibar.append(nb)
                    pi.append(pi_new * nb)
                    pi_new *= 1.0 - nb
                    tables.append(0.0)
                    nd.append(0.0)
                nd[k] += 1.0
                counts[k][w] = counts[k].get(w, 0.0) + 1.0
                m_k[k] += 1.0
                z[d][n] = k
        T = len(pi)
        tables = [0.0] * T
        for d, nd in enumerate(n_dk):
            r = RefRng.stream(seed, rnd + 1, d)
            for k in range(T):
                n = nd[k] if k < len(nd) else 0.0
                tables[k] += antoniak(int(n), max(b * pi[k], 2.2250738585072014e-308), r)
        above = sum(tables)
        for k in range(T):
            above -= tables[k]
            pibar[k] = rng.beta(su[k] + tables[k], sv[k] + max(above, 0.0))
        pi, pi_new = _sticks(pibar)
    keep = [k for k in range(len(pi)) if k < T0 or m_k[k] > 0]
    return _result(counts, keep, tables, m_k, [])


def dp_mult_batch(X, docs, mass, mass_sum, scale, u, v, *, eta, gamma, n_sweeps, seed):
    """Reference DP-mixture-of-multinomials minibatch (documents are the atoms), globals as
    for :func:`hdp_batch`."""
    rng = RefRng(seed)
    T0, V = mass.shape
    types = _docs(X, docs)
    lens = [float(sum(c for _, c in row)) for row in types]

    def lam_of(k, w):
        return eta + scale * float(mass[k, w]) if k < T0 else eta

    lam_sum = [V * eta + scale * float(mass_sum[k]) for k in range(T0)]
    new_ll = [math.lgamma(V * eta) - math.lgamma(V * eta + n) + sum(math.lgamma(eta + c) - math.lgamma(eta) for _, c in row) for row, n in zip(types, lens)]
    su, sv = list(map(float, u)), list(map(float, v))
    counts = [dict() for _ in range(T0)]
    m_k, n_k = [0.0] * T0, [0.0] * T0
    z = [None] * len(types)
    for _ in range(n_sweeps + 1):
        for i, row in enumerate(types):
            if z[i] is not None:
                old = z[i]
                for w, c in row:
                    counts[old][w] -= c
                m_k[old] -= lens[i]
                n_k[old] -= 1.0
            T = len(su)
            logp, rest = [], 0.0
            above = sum(n_k)
            for k in range(T):
                above -= n_k[k]
                a1, b1 = su[k] + n_k[k], sv[k] + max(above, 0.0)
                tot = lam_sum[k] + m_k[k]
                ll = math.lgamma(tot) - math.lgamma(tot + lens[i])
                for w, c in row:
                    x = lam_of(k, w) + counts[k].get(w, 0.0)
                    ll += math.lgamma(x + c) - math.lgamma(x)
                logp.append(ll + (rest + math.log(a1 / (a1 + b1))))
                rest += math.log(b1 / (a1 + b1))
            logp.append(rest + new_ll[i])
            mx = max(logp)
            k = rng.categorical([math.exp(x - mx) for x in logp])
            if k == T:
                counts.append({})
                lam_sum.append(V * eta)
                m_k.append(0.0)
                n_k.append(0.0)
                su.append(1.0)
                sv.append(gamma)
            for w, c in row:
                counts[k][w] = counts[k].get(w, 0.0) + c
            m_k[k] += lens[i]
            n_k[k] += 1.0
            z[i] = k
    keep = [k for k in range(len(su)) if k < T0 or n_k[k] > 0]
    renum = {k: j for j, k in enumerate(keep)}
    return _result(counts, keep, n_k, m_k, [renum[k] for k in z])
