"""Allocation models: the DP mixture (stick-breaking) and the finite mixture (symmetric Dirichlet).

Both are functions of the (effective) counts ``N`` only (spec 01 §3.2–§3.6):

* DP: :math:`q(u_k)=\\mathrm{Beta}(1+N_k,\\ \\gamma+N^>_k)`,
  :math:`\\mathbb E[\\ln\\pi_k]=\\mathbb E[\\ln u_k]+\\sum_{\\ell<k}\\mathbb E[\\ln(1-u_\\ell)]`, ELBO term
  :math:`\\sum_k[c_B(1,\\gamma)-c_B(1+N_k,\\gamma+N^>_k)]`;
* finite: :math:`q(\\pi)=\\mathrm{Dir}(\\gamma/K+N)`, ELBO term
  :math:`c_{Dir}(\\tfrac\\gamma K\\mathbf 1)-c_{Dir}(\\gamma/K+N)`.
"""

from __future__ import annotations

import numpy as np

from bnpcore import _core

__all__ = ["DPAlloc", "FiniteAlloc", "make_alloc"]


class DPAlloc:
    """Dirichlet-process mixture allocation with concentration ``gamma`` (nested in K).

    The math lives in the Rust core: ``core`` is the :class:`bnpcore._core.Alloc` built once
    from ``gamma``, and every method delegates to it.
    """

    name = "dp"
    nested = True

    def __init__(self, gamma: float):
        self.gamma = float(gamma)
        self.core = _core.Alloc("dp", self.gamma)

    def e_log_pi(self, N: np.ndarray) -> np.ndarray:
        return self.core.e_log_pi(np.ascontiguousarray(N, dtype=np.float64))

    def elbo(self, N: np.ndarray) -> float:
        return self.core.elbo(np.ascontiguousarray(N, dtype=np.float64))

    def weights(self, N: np.ndarray) -> np.ndarray:
        """E[π_k] renormalised over the K represented clusters."""
        w = self.core.e_pi(np.ascontiguousarray(N, dtype=np.float64))
        return w / w.sum()


class FiniteAlloc:
    """Finite mixture with a symmetric Dirichlet(γ/K) prior (not nested in K).

    The math lives in the Rust core: ``core`` is the :class:`bnpcore._core.Alloc` built once
    from ``gamma``, and every method delegates to it.
    """

    name = "finite"
    nested = False

    def __init__(self, gamma: float):
        self.gamma = float(gamma)
        self.core = _core.Alloc("finite", self.gamma)

    def e_log_pi(self, N: np.ndarray) -> np.ndarray:
        return self.core.e_log_pi(np.ascontiguousarray(N, dtype=np.float64))

    def elbo(self, N: np.ndarray) -> float:
        return self.core.elbo(np.ascontiguousarray(N, dtype=np.float64))

    def weights(self, N: np.ndarray) -> np.ndarray:
        """E[π_k] = θ_k / Σθ."""
        return self.core.e_pi(np.ascontiguousarray(N, dtype=np.float64))


def make_alloc(name: str, gamma: float):
    return {"dp": DPAlloc, "finite": FiniteAlloc}[name](gamma)
