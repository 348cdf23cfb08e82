r"""Additive summary statistics in parts, with stable component uids.

A :class:`SuffStats` summarises the responsibilities of some data (one batch, the whole
dataset, or a proposal) for K components with stable integer ``uids``. It is made of three
:class:`Part` objects, one per factor of the ELBO (Hughes thesis §2.3; Hughes & Sudderth 2013
§3):

* ``obs`` — the observation part: counts ``N`` (K,), data statistics ``S`` (K, stat_dim) and the
  base-measure scalar ``h`` = Σ_n h(x_n);
* ``alloc`` — what the allocation model needs beyond ``N`` (nothing for mixtures; per-document
  sums of E[ln π] for HDP topic models; start and transition counts, a K×K table, for HDP-HMMs);
* ``entropy`` — the assignment entropies ``H`` (K,) and any further entropy terms (e.g. the
  K×K table of transition entropies of an HDP-HMM).

Every field declares a :class:`Field`: how many leading **component axes** it has (0: a scalar
or a vector not indexed by component, e.g. the number of documents; 1: indexed by component on
axis 0; 2: a K×K table indexed on axes 0 and 1) and its **merge rule** — ``"add"`` for fields
linear in the responsibilities (merging components a and b adds column b into column a, and for
K×K tables row b into row a as well), ``"given"`` for fields that are not (entropies: the merged
value is not a function of the two columns and must be supplied by the move). The container
operations delegate to the parts, which apply them field by field:

* ``a + b``, ``a - b`` — summaries of disjoint data add (memoized learning relies on this);
* :meth:`SuffStats.interpolate` — the stochastic step ``(1-ρ)·a + (ρ·s)·b``; ``c * a`` scales;
* :meth:`~SuffStats.take`, :meth:`~SuffStats.drop` — reorder or remove components (both axes of
  K×K tables);
* :meth:`~SuffStats.merge` — merge two components;
* :meth:`~SuffStats.append` — add new components (birth moves).

Field names and their :class:`Field` are looked up in a registry (:func:`register_field`) when
a summary is built from plain arrays, so a model family declares its fields once; the
registry already knows the fields of the mixture, HDP topic and HDP-HMM families.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FIELDS", "Field", "Part", "SuffStats", "register_field"]

PARTS = ("obs", "alloc", "entropy")
MERGE_RULES = ("add", "given")


@dataclass(frozen=True)
class Field:
    """How one summary field behaves under the container operations.

    Parameters
    ----------
    part : {"obs", "alloc", "entropy"}
        The part of the summaries the field belongs to.
    axes : {0, 1, 2}
        Number of leading component axes: 0 (not indexed by component), 1 (axis 0 has length
        K), 2 (axes 0 and 1 have length K).
    merge : {"add", "given"}
        ``"add"``: linear in the responsibilities, so merging component b into a adds b's
        entries into a's (rows and columns of a K×K table); ``"given"``: the merged value is
        supplied by the move (entropy-like fields). Scalars (``axes=0``) with rule ``"add"``
        are unchanged by a merge.
    """

    part: str
    axes: int
    merge: str = "add"

    def __post_init__(self):
        if self.part not in PARTS:
            raise ValueError(f"`part` must be one of {PARTS}, got {self.part!r}")
        if self.axes not in (0, 1, 2):
            raise ValueError(f"`axes` must be 0, 1 or 2, got {self.axes!r}")
        if self.merge not in MERGE_RULES:
            raise ValueError(f"`merge` must be one of {MERGE_RULES}, got {self.merge!r}")


#: registry of known field names (mixture, HDP topic model and HDP-HMM families)
FIELDS: dict[str, Field] = {
    # every family
    "N": Field("obs", 1),
    "S": Field("obs", 1),
    "h": Field("obs", 0),
    "H": Field("entropy", 1, "given"),
    # HDP topic model, per batch (Hughes thesis §4.3): documents, E[ln π] sums, ELBO pieces
    "D": Field("alloc", 0),
    "P": Field("alloc", 1, "given"),
    "P_rem": Field("alloc", 0, "given"),
    "Q0": Field("alloc", 0, "given"),
    "Q": Field("alloc", 1, "given"),
    "Q_rem": Field("alloc", 0, "given"),
    # HDP-HMM (Hughes, Stephenson & Sudderth 2015): start and transition counts, entropies
    "n_seqs": Field("alloc", 0),
    "M0": Field("alloc", 1),
    "M": Field("alloc", 2),
    "Hstart": Field("entropy", 1, "given"),
    "Htable": Field("entropy", 2, "given"),
}


def register_field(name: str, field: Field) -> None:
    """Declare the :class:`Field` of a summary field name (a model family does this once for
    the fields its ``summarize`` produces). Re-registering a name with a different field is an
    error: the name would mean two things in saved summaries."""
    old = FIELDS.get(name)
    if old is not None and old != field:
        raise ValueError(f"summary field {name!r} is already registered as {old}")
    FIELDS[name] = field


def _field_of(name: str) -> Field:
    try:
        return FIELDS[name]
    except KeyError:
        raise ValueError(
            f"unknown summary field {name!r}: declare it with bnpcore.stats.register_field(name, Field(...))"
        ) from None


def _as_value(value, field: Field):
    if field.axes == 0 and np.ndim(value) == 0:
        return float(value)
    return np.asarray(value, dtype=np.float64)


def _copy(v):
    return v if isinstance(v, float) else np.array(v, copy=True)


def _scatter_add(v: np.ndarray, a: int, b: int, axes: int) -> np.ndarray:
    """Copy of ``v`` with component b's entries added into component a's (both axes for
    ``axes=2``: row b into row a, then column b into column a, so the (a, a) entry receives
    all four of (a, a), (a, b), (b, a), (b, b))."""
    out = np.array(v, dtype=np.float64, copy=True)
    out[a] += out[b]
    if axes == 2:
        out[:, a] += out[:, b]
    return out


class Part:
    """One part of the summaries: an ordered mapping from field names to values, each with
    its :class:`Field`. Operations return new parts (values are copied where changed).

    Parameters
    ----------
    values : dict of str to float or ndarray
    fields : dict of str to Field, optional
        The fields of ``values``; missing names are looked up in the registry.
    """

    __slots__ = ("fields", "values")

    def __init__(self, values=None, fields=None):
        values = dict(values or {})
        fields = dict(fields or {})
        self.fields = {k: fields[k] if k in fields else _field_of(k) for k in values}
        self.values = {k: _as_value(v, self.fields[k]) for k, v in values.items()}

    @classmethod
    def _raw(cls, values: dict, fields: dict) -> Part:
        out = cls.__new__(cls)
        out.values = values
        out.fields = fields
        return out

    def __contains__(self, name) -> bool:
        return name in self.values

    def __getitem__(self, name):
        return self.values[name]

    def __iter__(self):
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def keys(self):
        return self.values.keys()

    def items(self):
        return self.values.items()

    def copy(self) -> Part:
        return Part._raw({k: _copy(v) for k, v in self.values.items()}, dict(self.fields))

    def _check_same(self, other: Part) -> None:
        if self.fields != other.fields:
            raise ValueError(f"summaries have different fields ({sorted(self.fields)} vs {sorted(other.fields)})")

    def _binary(self, other: Part, fn) -> Part:
        self._check_same(other)
        return Part._raw({k: fn(v, other.values[k]) for k, v in self.values.items()}, dict(self.fields))

    def add(self, other: Part) -> Part:
        return self._binary(other, lambda a, b: a + b)

    def sub(self, other: Part) -> Part:
        return self._binary(other, lambda a, b: a - b)

    def interpolate(self, other: Part, rho: float, scale: float) -> Part:
        """``(1 - rho) * self + (rho * scale) * other``, field by field."""
        return self._binary(other, lambda a, b: (1.0 - rho) * a + (rho * scale) * b)

    def scale(self, c: float) -> Part:
        return Part._raw({k: c * v for k, v in self.values.items()}, dict(self.fields))

    def take(self, order: np.ndarray) -> Part:
        out = {}
        for k, v in self.values.items():
            axes = self.fields[k].axes
            if axes == 0:
                out[k] = _copy(v)
            elif axes == 1:
                out[k] = v[order]
            else:
                out[k] = v[np.ix_(order, order)]
        return Part._raw(out, dict(self.fields))

    def merge(self, a: int, b: int, given: dict) -> Part:
        """Merge component b into a (positions) and remove b. ``given`` supplies the merged
        value of every ``"given"`` field of this part: for ``axes=1`` the new entry of component
        a; for ``axes=0`` the new value; for ``axes=2`` the whole merged table, of shape
        (K - 1, K - 1) (b already removed). Each per-component field is written once, at size
        K - 1 (the same sums as adding b into a, then removing b)."""
        K = next((v.shape[0] for k, v in self.values.items() if self.fields[k].axes >= 1), None)
        keep = None if K is None else np.delete(np.arange(K), b)
        at = a - int(b < a)  # a's position once b is removed
        out = {}
        for k, v in self.values.items():
            f = self.fields[k]
            if f.merge == "add":
                if f.axes == 0:
                    out[k] = _copy(v)
                elif f.axes == 1:
                    nv = np.asarray(v, dtype=np.float64)[keep]
                    nv[at] += v[b]
                    out[k] = nv
                else:
                    out[k] = _scatter_add(v, a, b, 2)[np.ix_(keep, keep)]
                continue
            if k not in given:
                raise ValueError(f"merging components needs the merged value of summary field {k!r} (not linear in the responsibilities)")
            g = given[k]
            if f.axes == 0:
                out[k] = _as_value(g, f)
            elif f.axes == 1:
                nv = np.asarray(v, dtype=np.float64)[keep]
                nv[at] = g
                out[k] = nv
            else:
                out[k] = np.asarray(g, dtype=np.float64)
        return Part._raw(out, dict(self.fields))

    def append(self, n_new: int, new: dict, keep=None) -> Part:
        """Add ``n_new`` components at the end: ``new[name]`` gives their entries (shape
        ``(n_new, ...)`` for ``axes=1``; for ``axes=2`` the whole enlarged table); absent
        component fields get zeros; scalars are unchanged. With ``keep`` (positions), only
        those components are kept before the new ones (one copy instead of :meth:`take`'s and
        this method's)."""
        out = {}
        for k, v in self.values.items():
            f = self.fields[k]
            if f.axes == 0:
                out[k] = _copy(v)
            elif f.axes == 1:
                v = np.asarray(v, dtype=np.float64)
                m = v.shape[0] if keep is None else keep.shape[0]
                grown = np.empty((m + n_new, *v.shape[1:]))
                if keep is None:
                    grown[:m] = v
                else:
                    np.take(v, keep, axis=0, out=grown[:m], mode="clip")  # ("raise" buffers `out`)
                grown[m:] = np.asarray(new[k], dtype=np.float64).reshape((n_new, *v.shape[1:])) if k in new else 0.0
                out[k] = grown
            elif k in new:
                out[k] = np.asarray(new[k], dtype=np.float64)
            else:
                if keep is not None:
                    v = v[np.ix_(keep, keep)]
                K = v.shape[0]
                grown = np.zeros((K + n_new, K + n_new, *v.shape[2:]))
                grown[:K, :K] = v
                out[k] = grown
        return Part._raw(out, dict(self.fields))


class SuffStats:
    """Summaries of K components in three parts (observation, allocation, entropy) with stable
    ``uids``; see the module docstring.

    ``SuffStats(N, S, H, h, uids, extra=None)`` builds the mixture summaries; ``extra`` (dict of
    registered field names to values) adds fields to the parts the registry assigns them to.
    :meth:`from_parts` builds any summaries from explicit parts.

    Attributes
    ----------
    obs, alloc, entropy : Part
    uids : ndarray of int64, shape (K,)
    """

    __slots__ = ("alloc", "entropy", "obs", "uids")

    def __init__(self, N, S, H, h, uids, extra=None):
        obs = {"N": N, "S": S, "h": h}
        alloc: dict = {}
        entropy = {"H": H}
        for name, value in (extra or {}).items():
            part = _field_of(name).part
            {"obs": obs, "alloc": alloc, "entropy": entropy}[part][name] = value
        self.obs = Part(obs)
        self.alloc = Part(alloc)
        self.entropy = Part(entropy)
        self.uids = np.asarray(uids, dtype=np.int64)

    @classmethod
    def from_parts(cls, uids, obs: Part, alloc: Part | None = None, entropy: Part | None = None) -> SuffStats:
        """Summaries from explicit parts (``obs`` must hold ``N``)."""
        out = cls.__new__(cls)
        out.obs = obs
        out.alloc = alloc if alloc is not None else Part()
        out.entropy = entropy if entropy is not None else Part()
        out.uids = np.asarray(uids, dtype=np.int64)
        if "N" not in out.obs:
            raise ValueError("the observation part must hold the counts `N`")
        for name, part in out.parts().items():
            for k, f in part.fields.items():
                if f.part != name:
                    raise ValueError(f"summary field {k!r} belongs to the {f.part!r} part, not {name!r}")
        return out

    # ------------------------------------------------------------------ access
    def parts(self) -> dict:
        """``{"obs": Part, "alloc": Part, "entropy": Part}``."""
        return {"obs": self.obs, "alloc": self.alloc, "entropy": self.entropy}

    def _find(self, name: str) -> Part:
        for part in (self.obs, self.alloc, self.entropy):
            if name in part:
                return part
        raise KeyError(name)

    def __getitem__(self, name: str):
        """The value of any field, e.g. ``stats["M"]``."""
        return self._find(name).values[name]

    def __setitem__(self, name: str, value) -> None:
        part = self._find(name)
        part.values[name] = _as_value(value, part.fields[name])

    def __contains__(self, name: str) -> bool:
        return any(name in p for p in (self.obs, self.alloc, self.entropy))

    def field_names(self) -> list:
        return [k for p in (self.obs, self.alloc, self.entropy) for k in p]

    N = property(lambda self: self["N"], lambda self, v: self.__setitem__("N", v), doc="counts N_k, shape (K,)")
    S = property(lambda self: self["S"], lambda self, v: self.__setitem__("S", v), doc="data statistics, shape (K, stat_dim)")
    H = property(lambda self: self["H"], lambda self, v: self.__setitem__("H", v), doc="assignment entropies, shape (K,)")
    h = property(lambda self: self["h"], lambda self, v: self.__setitem__("h", v), doc="Σ_n h(x_n)")

    @property
    def extra(self) -> dict:
        """Every field other than ``N``, ``S``, ``H``, ``h`` (a new dict of the values)."""
        return {k: v for p in (self.obs, self.alloc, self.entropy) for k, v in p.items() if k not in ("N", "S", "H", "h")}

    @property
    def K(self) -> int:
        return int(self.uids.shape[0])

    def __repr__(self) -> str:
        return f"SuffStats(K={self.K}, uids={self.uids.tolist()}, fields={self.field_names()})"

    # -------------------------------------------------------------- construction
    def copy(self) -> SuffStats:
        return self._with(self.obs.copy(), self.alloc.copy(), self.entropy.copy(), self.uids.copy())

    def shallow_copy(self) -> SuffStats:
        """New containers around the same arrays: setting a field of the copy (``G.N = …``)
        leaves ``self`` alone; writing into one of its arrays (``G.N[0] = …``) would change
        ``self`` too (summaries are never written in place)."""
        return self._with(*(Part._raw(dict(p.values), dict(p.fields)) for p in (self.obs, self.alloc, self.entropy)), self.uids)

    def _with(self, obs, alloc, entropy, uids) -> SuffStats:
        out = SuffStats.__new__(SuffStats)
        out.obs, out.alloc, out.entropy, out.uids = obs, alloc, entropy, uids
        return out

    def _map(self, fn, uids=None) -> SuffStats:
        return self._with(fn(self.obs), fn(self.alloc), fn(self.entropy), self.uids.copy() if uids is None else uids)

    # -------------------------------------------------------------- arithmetic
    def _check(self, other: SuffStats):
        if not np.array_equal(self.uids, other.uids):
            raise ValueError("summaries refer to different clusters (uids differ)")

    def __add__(self, other: SuffStats) -> SuffStats:
        self._check(other)
        return self._with(self.obs.add(other.obs), self.alloc.add(other.alloc), self.entropy.add(other.entropy), self.uids.copy())

    def __sub__(self, other: SuffStats) -> SuffStats:
        self._check(other)
        return self._with(self.obs.sub(other.obs), self.alloc.sub(other.alloc), self.entropy.sub(other.entropy), self.uids.copy())

    def scale(self, c: float) -> SuffStats:
        """Every field multiplied by ``c``."""
        c = float(c)
        return self._map(lambda p: p.scale(c))

    def __mul__(self, c: float) -> SuffStats:
        return self.scale(c)

    __rmul__ = __mul__

    def interpolate(self, batch: SuffStats, rho: float, scale: float) -> SuffStats:
        r"""The stochastic step :math:`(1-\rho)\,\mathrm{self}+(\rho\,s)\,\mathrm{batch}`, field by
        field (``batch`` summarises a batch, ``scale`` = s blows it up to the dataset)."""
        self._check(batch)
        rho, scale = float(rho), float(scale)
        return self._with(
            self.obs.interpolate(batch.obs, rho, scale),
            self.alloc.interpolate(batch.alloc, rho, scale),
            self.entropy.interpolate(batch.entropy, rho, scale),
            self.uids.copy(),
        )

    # ------------------------------------------------------- component operations
    def positions(self, uids) -> np.ndarray:
        """Column positions of the given uids (KeyError if one is absent)."""
        where = {int(u): i for i, u in enumerate(self.uids)}
        return np.array([where[int(u)] for u in uids], dtype=np.int64)

    def take(self, order) -> SuffStats:
        """Components in the given positional order (a permutation or a subset); K×K tables are
        reordered along both axes."""
        order = np.asarray(order, dtype=np.int64)
        return self._map(lambda p: p.take(order), uids=self.uids[order])

    def _kept(self, positions) -> np.ndarray:
        """Positions left after removing ``positions``, in order."""
        return np.setdiff1d(np.arange(self.K), np.asarray(positions, dtype=np.int64))

    def drop(self, positions) -> SuffStats:
        return self.take(self._kept(positions))

    def merge(self, a: int, b: int, h_merged=None, **given) -> SuffStats:
        """Merge component ``b`` into component ``a`` (positions) and remove ``b``.

        ``"add"`` fields add b's entries into a's (rows and columns of K×K tables); every
        ``"given"`` field needs its merged value as a keyword argument (``H`` may be passed
        positionally as ``h_merged``): for a per-component field the new entry of ``a``, for a
        K×K table the whole merged table of shape (K - 1, K - 1) (without ``b``)."""
        if h_merged is not None:
            given["H"] = h_merged
        unknown = set(given) - set(self.field_names())
        if unknown:
            raise ValueError(f"no summary fields {sorted(unknown)} to merge")
        a, b = int(a), int(b)
        return self._map(lambda p: p.merge(a, b, given), uids=np.delete(self.uids, b))

    def append(self, N=None, S=None, H=None, uids=None, *, drop=None, **fields) -> SuffStats:
        """Add components with the given ``uids`` at the end. Per-component fields take the
        given rows (``N``, ``S``, ``H`` or any field by keyword), zeros where absent; K×K tables
        take the given enlarged table, or are zero-padded; scalars are unchanged. ``drop``:
        positions removed first (``self.drop(drop).append(…)`` in one copy)."""
        if uids is None:
            raise ValueError("`uids` of the new components are required")
        uids = np.asarray(uids, dtype=np.int64)
        for name, value in (("N", N), ("S", S), ("H", H)):
            if value is not None:
                fields[name] = value
        n_new = int(uids.shape[0])
        keep = None if drop is None else self._kept(drop)
        old = self.uids if keep is None else self.uids[keep]
        return self._map(lambda p: p.append(n_new, fields, keep), uids=np.concatenate([old, uids]))
