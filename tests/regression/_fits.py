"""The fixed set of fits whose ELBO traces guard refactors of the engine (issue: one engine for
three model families). ``make_fixture.py`` records them once; ``test_elbo_traces.py`` refits and
compares. Each fit is small (a few hundred rows, a handful of laps) so the whole set runs in
seconds."""

from __future__ import annotations

import warnings

import numpy as np

OBS = ("gauss", "diag_gauss", "zero_mean_gauss", "mult", "bern")


def make_data(obs: str, n: int = 400, d: int = 3, k: int = 4, seed: int = 0) -> np.ndarray:
    # deliberately a copy of tests/_helpers.make_data, frozen with the recorded traces: a change to
    # the shared helper must not move this fixture
    rng = np.random.default_rng(seed)
    z = rng.integers(0, k, size=n)
    if obs in ("gauss", "diag_gauss"):
        centers = rng.normal(0, 4, size=(k, d))
        return centers[z] + rng.normal(size=(n, d))
    if obs == "zero_mean_gauss":
        scales = rng.uniform(0.3, 3.0, size=(k, d))
        return rng.normal(size=(n, d)) * scales[z]
    if obs == "mult":
        p = rng.dirichlet(np.full(2 * d, 0.3), size=k)
        return np.stack([rng.multinomial(20, p[j]) for j in z]).astype(np.float64)
    p = rng.uniform(0.05, 0.95, size=(k, 2 * d))
    return (rng.random((n, 2 * d)) < p[z]).astype(np.float64)


def cases() -> list[dict]:
    """Every observation model x DP/finite x full/memoized/stochastic, dense and top_l=2, without
    moves; plus the default moves (memoized DP) and explicit moves with full-dataset laps."""
    out = []
    for obs in OBS:
        for est in ("DPMixture", "FiniteMixture"):
            for algorithm in ("full", "memoized", "stochastic"):
                for top_l in (None, 2):
                    out.append(
                        dict(est=est, obs=obs, algorithm=algorithm, top_l=top_l, moves=(), n_components=6, max_laps=5)
                    )
        out.append(dict(est="DPMixture", obs=obs, algorithm="memoized", top_l=None, moves=None, n_components=2, max_laps=8))
        out.append(dict(est="DPMixture", obs=obs, algorithm="memoized", top_l=3, moves=None, n_components=2, max_laps=8))
        out.append(
            dict(est="DPMixture", obs=obs, algorithm="full", top_l=None, moves=("merge", "delete"), n_components=8, max_laps=8)
        )
    return out


def case_id(c: dict) -> str:
    moves = "default" if c["moves"] is None else ("+".join(c["moves"]) or "none")
    return f"{c['est']}-{c['obs']}-{c['algorithm']}-L{c['top_l']}-moves_{moves}"


def run(c: dict) -> dict:
    import bnpcore

    X = make_data(c["obs"])
    cls = getattr(bnpcore, c["est"])
    model = cls(
        obs=c["obs"],
        n_components=c["n_components"],
        algorithm=c["algorithm"],
        n_batches=3,
        max_laps=c["max_laps"],
        min_laps=c["max_laps"],
        top_l=c["top_l"],
        moves=c["moves"],
        random_state=7,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)
        model.fit(X)
    return {
        "elbo": [float(v) for v in model.history_["elbo"]],
        "n_components": [int(v) for v in model.history_["n_components"]],
        "n_accepted": int(sum(1 for r in model.moves_log_ if r["accepted"])),
    }
