"""Helpers shared by the benchmark scripts (not part of the package)."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

RESULTS = Path(__file__).resolve().parent.parent / "bench_results"


def plugin_loglik(weights, means, covariances, X) -> np.ndarray:
    """log Σ_k w_k N(x | μ_k, Σ_k): the one held-out metric applied to every system (DATA.md)."""
    K, D = means.shape
    out = np.empty((X.shape[0], K))
    for k in range(K):
        L = np.linalg.cholesky(covariances[k])
        z = np.linalg.solve(L, (X - means[k]).T)
        out[:, k] = -0.5 * D * np.log(2 * np.pi) - np.log(np.diag(L)).sum() - 0.5 * (z * z).sum(axis=0)
    with np.errstate(divide="ignore"):
        return logsumexp(out + np.log(weights), axis=1)


def gaussian_heldout_split(n_samples: int):
    """The 16-D, 25-cluster benchmark data (``make_gaussian_mixture``, seed 0) and a seeded
    random 10 % of its rows to hold out: ``(X, y, test)`` with ``test`` a boolean row mask."""
    from bnpcore.datasets import make_gaussian_mixture

    X, y = make_gaussian_mixture(n_samples=n_samples, random_state=0)
    rng = np.random.default_rng(0)
    test = np.zeros(n_samples, dtype=bool)
    test[rng.choice(n_samples, n_samples // 10, replace=False)] = True
    return X, y, test


def machine() -> dict:
    info = {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def save(name: str, payload: dict) -> Path:
    RESULTS.mkdir(exist_ok=True)
    payload = {"benchmark": name, "machine": machine(), "time": time.strftime("%Y-%m-%dT%H:%M:%S"), **payload}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, default=float))
    return path


def table(rows, headers) -> str:
    widths = [max(len(str(h)), *(len(f"{r[i]}") for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(str(h).rjust(w) for h, w in zip(headers, widths))
    out = [line, "-" * len(line)]
    for r in rows:
        out.append("  ".join(f"{v}".rjust(w) for v, w in zip(r, widths)))
    return "\n".join(out)
