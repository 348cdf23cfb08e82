r"""Allocation models and the protocol every allocation model follows.

An *allocation model* is the part of a model that says how observations choose components: a
mixture's weights, an HDP topic model's document-topic proportions, an HDP-HMM's transitions.
The engine talks to it only through :class:`AllocModel` (Hughes thesis §2.3, the allocation
half of the ELBO), always passing the summaries :class:`~bnpcore.stats.SuffStats`, so a family
whose allocation needs more than the counts (per-document sums, transition tables in the
summaries' ``alloc`` part) fits the same calls.

The two mixtures here are functions of the (effective) counts ``N`` only (Hughes & Sudderth
2013, §2; Blei & Jordan 2006):

* DP: :math:`q(u_k)=\mathrm{Beta}(1+N_k,\ \gamma+N^>_k)`,
  :math:`\mathbb E[\ln\pi_k]=\mathbb E[\ln u_k]+\sum_{\ell<k}\mathbb E[\ln(1-u_\ell)]`, ELBO term
  :math:`\sum_k[c_B(1,\gamma)-c_B(1+N_k,\gamma+N^>_k)]`;
* finite: :math:`q(\pi)=\mathrm{Dir}(\gamma/K+N)`, ELBO term
  :math:`c_{Dir}(\tfrac\gamma K\mathbf 1)-c_{Dir}(\gamma/K+N)`.

Their math lives in the Rust core (:class:`bnpcore._core.Alloc`), which also computes
:math:`\mathbb E[\ln\pi]` inside every local step. An allocation model written in Python
(:class:`PythonAlloc`) hands the local step its :math:`\mathbb E[\ln\pi]` as fixed log weights.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from bnpcore import _core

__all__ = ["ALLOC_KINDS", "AllocModel", "DPAlloc", "FiniteAlloc", "PythonAlloc", "alloc_from_dict", "make_alloc"]


@runtime_checkable
class AllocModel(Protocol):
    """What the engine needs from an allocation model (methods take the summaries ``stats``).

    Attributes
    ----------
    name : str
        Identifier (``"dp"``, ``"finite"``, ...).
    nested : bool
        The truncation is nested (components are ordered and the last ones may be dropped):
        empty components may be removed, components sorted by size, and moves applied.
    """

    name: str
    nested: bool

    def global_step(self, stats) -> dict:
        """Optimal parameters of q(allocation) given the summaries (dict of arrays)."""

    def core_for(self, stats):
        """The :class:`bnpcore._core.Alloc` a local step with global summaries ``stats`` uses."""

    def e_log_pi(self, stats) -> np.ndarray:
        """E[ln π_k], shape (K,)."""

    def elbo(self, stats) -> float:
        """The allocation term of the ELBO at the optimal q(allocation)."""

    def weights(self, stats) -> np.ndarray:
        """Posterior-mean weights of the K represented components, shape (K,)."""

    def merge_delta(self, stats) -> np.ndarray:
        """Exact change of :meth:`elbo` when components i < j merge, shape (K, K) (−inf where
        i ≥ j)."""

    def to_dict(self) -> dict:
        """``name``, hyperparameters and any state as plain values and arrays;
        :func:`alloc_from_dict` rebuilds the model (model files)."""


def _counts(stats) -> np.ndarray:
    """The counts N of summaries (mixture allocations also accept the counts themselves)."""
    return np.ascontiguousarray(getattr(stats, "N", stats), dtype=np.float64)


class _MixtureAlloc:
    """An allocation model implemented by the Rust core (a function of N only)."""

    name = ""
    nested = False

    def __init__(self, gamma: float):
        self.gamma = float(gamma)
        self.core = _core.Alloc(self.name, self.gamma)

    def __getstate__(self):
        return {"gamma": self.gamma}

    def __setstate__(self, state):
        self.__init__(state["gamma"])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(gamma={self.gamma!r})"

    def to_dict(self) -> dict:
        return {"name": self.name, "gamma": self.gamma}

    @classmethod
    def from_dict(cls, d: dict):
        return cls(float(d["gamma"]))

    def core_for(self, stats):
        return self.core

    def e_log_pi(self, stats) -> np.ndarray:
        return self.core.e_log_pi(_counts(stats))

    def elbo(self, stats) -> float:
        return self.core.elbo(_counts(stats))

    def merge_delta(self, stats) -> np.ndarray:
        return self.core.merge_delta(_counts(stats))


class DPAlloc(_MixtureAlloc):
    """Dirichlet-process mixture allocation with concentration ``gamma`` (nested in K).

    The math lives in the Rust core: ``core`` is the :class:`bnpcore._core.Alloc` built once
    from ``gamma``, and every method delegates to it.
    """

    name = "dp"
    nested = True

    def global_step(self, stats) -> dict:
        r"""Stick posteriors :math:`q(u_k)=\mathrm{Beta}(\eta_{k1},\eta_{k0})`,
        :math:`\eta_{k1}=1+N_k`, :math:`\eta_{k0}=\gamma+\sum_{\ell>k}N_\ell` (counts clamped
        at 0 against round-off, as in the core)."""
        N = np.maximum(_counts(stats), 0.0)
        greater = np.concatenate([np.cumsum(N[::-1])[::-1][1:], [0.0]])
        return {"eta1": 1.0 + N, "eta0": self.gamma + greater}

    def weights(self, stats) -> np.ndarray:
        """E[π_k] renormalised over the K represented clusters."""
        w = self.core.e_pi(_counts(stats))
        return w / w.sum()


class FiniteAlloc(_MixtureAlloc):
    """Finite mixture with a symmetric Dirichlet(γ/K) prior (not nested in K).

    The math lives in the Rust core: ``core`` is the :class:`bnpcore._core.Alloc` built once
    from ``gamma``, and every method delegates to it.
    """

    name = "finite"
    nested = False

    def global_step(self, stats) -> dict:
        r""":math:`q(\pi)=\mathrm{Dir}(\theta)`, :math:`\theta_k=\gamma/K+N_k`."""
        N = _counts(stats)
        return {"theta": self.gamma / N.shape[0] + N}

    def weights(self, stats) -> np.ndarray:
        """E[π_k] = θ_k / Σθ."""
        return self.core.e_pi(_counts(stats))


class PythonAlloc:
    """Base class of allocation models written in Python.

    Subclasses implement :meth:`e_log_pi`, :meth:`elbo`, :meth:`weights` and
    :meth:`merge_delta` (and :meth:`global_step` if q(allocation) has parameters of its own);
    the local step receives :math:`\\mathbb E[\\ln\\pi]` through
    :meth:`bnpcore._core.Alloc.fixed`. Moves that fit fresh components (birth) need an
    allocation model with a Rust core.
    """

    name = "python"
    nested = False

    def global_step(self, stats) -> dict:
        return {}

    def core_for(self, stats):
        return _core.Alloc.fixed(np.ascontiguousarray(self.e_log_pi(stats), dtype=np.float64))

    def to_dict(self) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def e_log_pi(self, stats) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def elbo(self, stats) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def weights(self, stats) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def merge_delta(self, stats) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


#: allocation models by name (:func:`make_alloc`, :func:`alloc_from_dict`)
ALLOC_KINDS = {"dp": DPAlloc, "finite": FiniteAlloc}


def make_alloc(name: str, gamma: float):
    """The mixture allocation ``name`` (``"dp"`` or ``"finite"``) with concentration ``gamma``."""
    return alloc_from_dict({"name": name, "gamma": gamma})


def alloc_from_dict(d: dict):
    """Rebuild an allocation model from its :meth:`AllocModel.to_dict`."""
    cls = ALLOC_KINDS.get(d.get("name"))
    if cls is None:
        raise ValueError(f"unknown allocation model {d.get('name')!r}; known: {sorted(ALLOC_KINDS)}")
    return cls.from_dict(d)
