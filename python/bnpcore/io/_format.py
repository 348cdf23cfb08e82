"""Model files and checkpoints: one ``.npz`` archive of numpy arrays plus JSON metadata.

The format is documented in ``docs/model_format.md``. Nothing is pickled: ``load`` opens the
archive with ``allow_pickle=False``, checks the format name and version, verifies a CRC-32 of
every array, looks the estimator class up in the model-type registry
(:func:`~bnpcore.io.register_model_type`; this module imports no estimator) and rebuilds the
estimator from its constructor parameters, the observation prior and the
:class:`~bnpcore.algorithms._base.FitState` (summaries, memos, uids, random streams, traces), so
that a loaded model predicts identically and continues fitting (``warm_start``) exactly as the
saved one would have.

A registered class provides the *persistence protocol* used here: ``get_params()`` and the
class method ``_param_names()`` (constructor parameters); when fitted, the attributes
``state_`` (a ``FitState``), ``obs_model_`` (an :class:`~bnpcore.obs.ObsModel`),
``n_features_in_`` and ``_n_rows``, and the methods ``_make_model(obs_model)`` and
``_finalize(model)`` (recompute the public fitted attributes from the state).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import io
import json
import math
import os
import uuid
import zipfile
import zlib

import numpy as np

from bnpcore.exceptions import ModelFileError
from bnpcore.io._registry import lookup_model_type, model_type_name

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "load", "save"]

FORMAT_NAME = "bnpcore-model"
FORMAT_VERSION = 2
#: older versions this bnpcore still reads (version 1 files have no move state)
READABLE_VERSIONS = (1, 2)

#: FitState fields with a dedicated representation in the file
_STATE_FIELDS = {
    "stats", "memos", "frozen", "next_uid", "rng_order", "rng_moves", "lap", "history",
    "batch_elbo", "moves_log", "seconds", "stochastic_step", "batch_seed", "moves_state",
    "overrelax",
}


#: constructor parameters that describe where a fit runs, not the model: never saved (stored as
#: null, listed in ``dropped_params`` when set) and never restored, so a loaded model does not
#: reconnect to a cluster that may be gone (a Dask ``client`` object or scheduler address)
_NOT_SAVED_PARAMS = ("client",)


def _json_default(obj):
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _jsonable(value) -> bool:
    try:
        json.dumps(value, default=_json_default)
        return True
    except (TypeError, ValueError):
        return False


def _checked(value, like, what: str):
    """``value`` read from the metadata if it has the JSON type of ``like`` (an int for an int,
    a bool for a bool, a number for a float, an int or null for None, a str, a list, a dict),
    else a ModelFileError naming ``what``: a file never loads with a string, a float or a bool
    where a count or a flag belongs."""
    if like is None:
        ok = value is None or (isinstance(value, int) and not isinstance(value, bool))
    elif isinstance(like, bool):
        ok = isinstance(value, bool)
    elif isinstance(like, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(like, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    else:
        ok = isinstance(value, type(like))
    if not ok:
        names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list", dict: "an object"}
        wanted = "an integer or null" if like is None else names.get(type(like), type(like).__name__)
        raise ModelFileError(f"metadata {what} is {value!r}, not {wanted}")
    return value


def _rng_to_json(rng: np.random.Generator) -> dict:
    return rng.bit_generator.state


def _rng_from_json(d: dict) -> np.random.Generator:
    name = d["bit_generator"]
    if name not in ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"):
        raise ModelFileError(f"unknown bit generator {name!r}")
    bg = getattr(np.random, name)()
    bg.state = d
    return np.random.Generator(bg)


def _put_stats(arrays: dict, prefix: str, s) -> dict:
    arrays[prefix + "N"] = np.asarray(s.N, dtype=np.float64)
    arrays[prefix + "S"] = np.asarray(s.S, dtype=np.float64)
    arrays[prefix + "H"] = np.asarray(s.H, dtype=np.float64)
    arrays[prefix + "h"] = np.array(float(s.h))
    arrays[prefix + "uids"] = np.asarray(s.uids, dtype=np.int64)
    for k, v in s.extra.items():
        arrays[f"{prefix}extra/{k}"] = np.asarray(v)
    return {"extra": sorted(s.extra)}


def _get_stats(arrays, prefix: str, info: dict):
    from bnpcore.stats import SuffStats

    for k in ("N", "S", "H", "h", "uids"):
        if arrays[prefix + k].dtype.kind not in "biuf":
            raise ModelFileError(f"array {prefix + k!r} has dtype {arrays[prefix + k].dtype}, not a numeric one")
    s = SuffStats(
        np.array(arrays[prefix + "N"], dtype=np.float64),
        np.array(arrays[prefix + "S"], dtype=np.float64),
        np.array(arrays[prefix + "H"], dtype=np.float64),
        float(arrays[prefix + "h"]),
        np.array(arrays[prefix + "uids"], dtype=np.int64),
        {k: np.array(arrays[f"{prefix}extra/{k}"]) for k in info.get("extra", [])},
    )
    K = s.uids.shape[0]
    if s.N.shape != (K,) or s.H.shape != (K,) or s.S.ndim != 2 or s.S.shape[0] != K:
        raise ModelFileError(f"inconsistent summary shapes under {prefix!r}")
    if np.unique(s.uids).size != K:
        raise ModelFileError(f"repeated cluster uids under {prefix!r}")
    return s


def _put_tree(arrays: dict, prefix: str, tree):
    """JSON of a nested structure of dicts/lists/scalars whose arrays go to ``arrays`` under
    ``prefix<n>`` (referenced as ``{"__array__": key}``)."""
    if isinstance(tree, np.ndarray):
        key = f"{prefix}{sum(k.startswith(prefix) for k in arrays)}"
        arrays[key] = np.ascontiguousarray(tree)
        return {"__array__": key}
    if isinstance(tree, dict):
        return {str(k): _put_tree(arrays, prefix, v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [_put_tree(arrays, prefix, v) for v in tree]
    if isinstance(tree, np.generic):
        return tree.item()
    return tree


def _get_tree(arrays: dict, tree):
    if isinstance(tree, dict):
        if set(tree) == {"__array__"}:
            return np.array(arrays[tree["__array__"]])
        return {k: _get_tree(arrays, v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_get_tree(arrays, v) for v in tree]
    return tree


def _collect(est) -> tuple[dict, dict]:
    """(metadata, arrays) of an estimator."""
    import bnpcore

    arrays: dict = {}
    params = {}
    dropped = []
    for name, value in est.get_params().items():
        if name in _NOT_SAVED_PARAMS:
            params[name] = None
            if value is not None:
                dropped.append(name)
        elif isinstance(value, np.ndarray):
            arrays[f"param/{name}"] = value
            params[name] = {"__array__": f"param/{name}"}
        elif isinstance(value, tuple) and _jsonable(list(value)):
            params[name] = {"__tuple__": list(value)}
        elif _jsonable(value):
            params[name] = value
        else:  # callables, Generators... cannot be stored without pickle
            params[name] = None
            dropped.append(name)
    meta = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "bnpcore_version": bnpcore.__version__,
        "estimator": model_type_name(type(est)),
        "params": params,
        "dropped_params": dropped,
        "fitted": hasattr(est, "state_") and hasattr(est, "obs_model_"),
    }
    if not meta["fitted"]:
        return meta, arrays
    obs = est.obs_model_
    scalars = {}
    for k, v in obs.prior.items():
        if np.ndim(v) == 0:
            scalars[k] = float(v)
        else:
            arrays[f"obs/prior/{k}"] = np.asarray(v, dtype=np.float64)
    meta["obs"] = {"kind": obs.kind, "prior_scalars": scalars, "prior_arrays": sorted(k for k in obs.prior if np.ndim(obs.prior[k]) > 0)}
    if getattr(obs, "shift", None) is not None:  # optional: files without it load unshifted
        arrays["obs/shift"] = np.asarray(obs.shift, dtype=np.float64)
        meta["obs"]["shift"] = True
    meta["n_features_in"] = int(est.n_features_in_)
    if getattr(est, "feature_names_in_", None) is not None:  # optional: files without it load as before
        meta["feature_names_in"] = [str(c) for c in est.feature_names_in_]
    meta["n_rows"] = int(getattr(est, "_n_rows", 0))
    meta["converged"] = getattr(est, "converged_", None)
    meta["n_iter"] = getattr(est, "n_iter_", None)
    st = est.state_
    st.localize_memos()  # memos kept on a cluster's workers are written from this process
    state = {
        "next_uid": int(st.next_uid),
        "lap": int(st.lap),
        "seconds": float(st.seconds),
        "stochastic_step": int(st.stochastic_step),
        "batch_seed": None if st.batch_seed is None else int(st.batch_seed),
        "rng_order": _rng_to_json(st.rng_order),
        "rng_moves": _rng_to_json(st.rng_moves),
        "moves_log": json.loads(json.dumps(st.moves_log, default=_json_default)),
        "G": _put_stats(arrays, "G/", st.stats),
        "memos": [None if m is None else _put_stats(arrays, f"memo/{i}/", m) for i, m in enumerate(st.memos)],
        "frozen": [_put_stats(arrays, f"frozen/{i}/", m) for i, m in enumerate(st.frozen)],
        "moves_state": _put_tree(arrays, "moves/", st.moves_state),
        "overrelax": _put_tree(arrays, "overrelax/", st.overrelax),
        "history_keys": list(st.history),
        "extra_fields": {},
    }
    for k, v in st.history.items():
        arrays[f"history/{k}"] = np.asarray(v, dtype=np.int64 if k in ("lap", "n_components") else np.float64)
    arrays["batch_elbo"] = np.asarray(st.batch_elbo, dtype=np.float64)
    for f in dataclasses.fields(st):
        if f.name in _STATE_FIELDS:
            continue
        value = getattr(st, f.name)
        if not _jsonable(value):
            raise TypeError(f"FitState field {f.name!r} cannot be saved (not JSON serialisable)")
        state["extra_fields"][f.name] = json.loads(json.dumps(value, default=_json_default))
    meta["state"] = state
    return meta, arrays


def save(model, path) -> None:
    """Save a (fitted or unfitted) estimator to ``path`` atomically.

    The archive is written to a temporary file in the same directory, flushed to disk and then
    renamed over ``path`` (``os.replace``), so ``path`` always holds either the previous or the
    new complete file, even if the process is killed while saving.

    Parameters
    ----------
    model : estimator of a registered model type (:func:`~bnpcore.io.register_model_type`)
    path : str or os.PathLike
        Destination file (any name; ``.npz`` is conventional). The format is described in
        ``docs/model_format.md``.

    Raises
    ------
    ParameterError
        If the class of ``model`` is not registered.
    OSError
        If ``path`` cannot be written (its directory does not exist or is not writable, ``path``
        is a directory...); the exception (e.g. ``FileNotFoundError``) names ``path`` as its
        ``filename``, never the temporary file. A missing directory is detected before anything
        is collected or written.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(errno.ENOENT, f"cannot save the model: directory {directory!r} does not exist", path)
    meta, arrays = _collect(model)
    checks = {k: zlib.crc32(np.ascontiguousarray(v).tobytes()) for k, v in arrays.items()}
    meta["crc32"] = checks
    blob = json.dumps(meta, default=_json_default, allow_nan=True).encode("utf-8")
    arrays = dict(arrays)
    arrays["__meta__"] = np.frombuffer(blob, dtype=np.uint8)
    # a name of its own per save: a second save to the same path (another thread of this process)
    # must neither truncate this file nor have it renamed away while it is written
    tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp-{os.getpid()}-{uuid.uuid4().hex[:12]}")
    try:
        with open(tmp, "xb") as fh:
            np.savez(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if exc.errno is None:
            raise
        # the same kind of error, about the file the caller named rather than the temporary one
        raise OSError(exc.errno, f"cannot save the model: {exc.strerror or os.strerror(exc.errno)}", path) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _check_archive(path: str, raw: bytes) -> None:
    """Refuse, before numpy reads any member, a file that is not an uncompressed zip of ``.npy``
    arrays whose headers declare exactly the bytes they hold: so a damaged or forged header (a
    huge shape) or a compressed member cannot make ``load`` allocate more than the file's size."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
    except Exception:  # BadZipFile, or e.g. NotImplementedError for a damaged version field
        raise ModelFileError(f"{path!r} is not a readable bnpcore model file: not a zip (.npz) archive, or a truncated one") from None
    with archive:
        members = archive.infolist()
        if sum(m.compress_size for m in members) > len(raw):
            raise ModelFileError(f"{path!r} is corrupted: its zip directory declares more bytes than the file holds")
        for m in members:
            if not m.filename.endswith(".npy"):
                raise ModelFileError(f"{path!r} is not a bnpcore model file: member {m.filename!r} is not a .npy array")
            if m.compress_type != zipfile.ZIP_STORED:
                raise ModelFileError(f"{path!r} is not a bnpcore model file: member {m.filename!r} is compressed (model files are uncompressed .npz)")
            try:
                with archive.open(m) as fh:
                    version = np.lib.format.read_magic(fh)
                    if version == (1, 0):
                        shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
                    elif version == (2, 0):
                        shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
                    else:
                        raise ValueError(f".npy format version {version} is not supported")
                    data_bytes = m.file_size - fh.tell()
            except Exception as exc:
                raise ModelFileError(f"{path!r} is corrupted: member {m.filename!r} has no readable .npy header: {exc}") from None
            if dtype.hasobject:
                raise ModelFileError(f"{path!r} is not a bnpcore model file: member {m.filename!r} holds Python objects")
            declared = math.prod(shape) * dtype.itemsize
            if declared != data_bytes:
                raise ModelFileError(
                    f"{path!r} is corrupted: member {m.filename!r} declares shape {shape} of {dtype} ({declared} bytes) "
                    f"but holds {data_bytes} bytes"
                )


def _read(path) -> tuple[dict, dict]:
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise ModelFileError(f"no such model file: {path!r}") from None
    except OSError as exc:
        raise ModelFileError(f"cannot read model file {path!r}: {exc}") from None
    _check_archive(path, raw)
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        meta = json.loads(arrays.pop("__meta__").tobytes().decode("utf-8"))
    except Exception as exc:
        raise ModelFileError(f"{path!r} is not a readable bnpcore model file (corrupted or not a model): {exc}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{path!r} is not a bnpcore model file")
    version = meta.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or version not in READABLE_VERSIONS:
        raise ModelFileError(
            f"{path!r} has model-file format version {version!r}; this bnpcore reads version {FORMAT_VERSION} (and the older {list(READABLE_VERSIONS[:-1])})"
        )
    checks = meta.get("crc32", {})
    if set(checks) != set(arrays):
        raise ModelFileError(f"{path!r} is corrupted: its arrays do not match its table of contents")
    for k, v in arrays.items():
        if zlib.crc32(np.ascontiguousarray(v).tobytes()) != checks[k]:
            raise ModelFileError(f"{path!r} is corrupted: checksum mismatch in array {k!r}")
    return meta, arrays


def load(path):
    """Load an estimator saved by :func:`save` (or written as a checkpoint).

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    estimator
        Of the class registered under the file's model type, with its constructor parameters
        and, if it was fitted, every fitted attribute and the complete fitting state, so
        ``warm_start=True`` continues the run exactly.

    Raises
    ------
    ModelFileError
        If the file is missing, corrupted, not a bnpcore model, of another format version, or
        of a model type that is not registered.
    """
    meta, arrays = _read(path)
    cls = lookup_model_type(meta.get("estimator"), source=repr(os.fspath(path)))
    try:
        return _build(cls, meta, arrays)
    except Exception as exc:  # ModelFileError of a check in _build too: the message names the file
        raise ModelFileError(f"{os.fspath(path)!r} is corrupted or inconsistent: {exc}") from None


def _build(cls, meta: dict, arrays: dict):
    from bnpcore.algorithms._base import FitState
    from bnpcore.obs import ObsModel

    params = {}
    for name, value in meta["params"].items():
        if name in _NOT_SAVED_PARAMS:  # files written before it was dropped may hold an address
            continue
        if isinstance(value, dict) and "__array__" in value:
            value = np.array(arrays[value["__array__"]])
        elif isinstance(value, dict) and "__tuple__" in value:
            value = tuple(value["__tuple__"])
        params[name] = value
    valid = set(cls._param_names())
    est = cls(**{k: v for k, v in params.items() if k in valid})
    if not _checked(meta["fitted"], True, "'fitted'"):
        return est
    o = meta["obs"]
    prior = dict(o["prior_scalars"])
    for k in o["prior_arrays"]:
        prior[k] = np.array(arrays[f"obs/prior/{k}"])
    est.obs_model_ = ObsModel(o["kind"], prior, shift=np.array(arrays["obs/shift"]) if o.get("shift") else None)
    est._obs_params_ = est._obs_param_values()  # the file's arguments are those of its fit
    s = meta["state"]
    history = {}
    for k in s["history_keys"]:
        a = arrays[f"history/{k}"]
        if a.ndim != 1 or a.dtype.kind not in "iuf":
            raise ModelFileError(f"history {k!r} is not a 1-D numeric array")
        history[k] = [int(v) for v in a] if a.dtype.kind in "iu" else [float(v) for v in a]
    n_laps = len(history.get("lap", ()))
    for k, v in history.items():  # one entry per lap (extra entries such as "score": at most one)
        if len(v) != n_laps if k in ("lap", "elbo", "n_components", "seconds") else len(v) > n_laps:
            raise ModelFileError(f"history {k!r} has {len(v)} entries for {n_laps} laps")
    state = FitState(
        stats=_get_stats(arrays, "G/", s["G"]),
        memos=[None if m is None else _get_stats(arrays, f"memo/{i}/", m) for i, m in enumerate(s["memos"])],
        next_uid=_checked(s["next_uid"], 0, "state 'next_uid'"),
        rng_order=_rng_from_json(s["rng_order"]),
        rng_moves=_rng_from_json(s["rng_moves"]),
        lap=_checked(s["lap"], 0, "state 'lap'"),
        history=history,
        batch_elbo=[float(v) for v in arrays["batch_elbo"]],
        moves_log=list(s["moves_log"]),
        seconds=float(_checked(s["seconds"], 0.0, "state 'seconds'")),
        stochastic_step=_checked(s["stochastic_step"], 0, "state 'stochastic_step'"),
        frozen=[_get_stats(arrays, f"frozen/{i}/", m) for i, m in enumerate(s["frozen"])],
        batch_seed=_checked(s["batch_seed"], None, "state 'batch_seed'"),
        moves_state=_get_tree(arrays, s.get("moves_state") or {}),
        overrelax=_get_tree(arrays, s.get("overrelax") or {}),
    )
    defaults = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory() for f in dataclasses.fields(FitState)
                if f.name not in _STATE_FIELDS and (f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING)}
    for k, v in _checked(s.get("extra_fields", {}), {}, "state 'extra_fields'").items():
        if k in defaults:  # fields this bnpcore does not know are ignored (a newer writer's additions)
            setattr(state, k, _checked(v, defaults[k], f"state field {k!r}"))
    stat_dim = est.obs_model_.stat_dim
    for m in [state.stats, *state.frozen, *(m for m in state.memos if m is not None)]:
        if m.S.shape[1] != stat_dim:
            raise ModelFileError(f"summary width {m.S.shape[1]} does not match the observation model ({stat_dim})")
    est.state_ = state
    n_features = _checked(meta["n_features_in"], 0, "'n_features_in'")
    # the observation model's width: the user's columns (auto-regressive rows pair x_t with x_{t-1})
    width = est.obs_model_.n_features // 2 if est.obs_model_.kind == "ar_gauss" else est.obs_model_.n_features
    if n_features != width:
        raise ModelFileError(f"'n_features_in' is {n_features} but the observation model has {width} features")
    est.n_features_in_ = n_features
    names = meta.get("feature_names_in")
    if names is not None:
        if not (isinstance(names, list) and len(names) == n_features and all(isinstance(c, str) for c in names)):
            raise ModelFileError(f"'feature_names_in' is not a list of {n_features} strings")
        est.feature_names_in_ = np.asarray(names, dtype=object)
    est._n_rows = _checked(meta["n_rows"], 0, "'n_rows'")
    if meta.get("converged") is not None:
        est.converged_ = _checked(meta["converged"], True, "'converged'")
    if meta.get("n_iter") is not None:
        est.n_iter_ = _checked(meta["n_iter"], 0, "'n_iter'")
    est._finalize(est._make_model(est.obs_model_))
    return est
