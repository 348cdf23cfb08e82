"""Run one BNPy fit in BNPy's own interpreter and write what ``bench_bnpy.py`` needs as JSON.

Invoked by ``benches/bench_bnpy.py`` with the Python of the BNPy environment
(``scripts/setup_bnpy.sh``); it must not import bnpcore (that environment has an old NumPy and
no bnpcore). Usage::

    python _bnpy_driver.py SPEC.json

``SPEC.json`` holds ``data`` (path of a float64 ``.npy``, rows = observations), ``out`` (path of
the JSON to write), ``alloc``, ``obs``, ``alg`` (BNPy's model and algorithm names), ``kwargs``
(passed to ``bnpy.run``) and optionally ``labels`` (path of a ``.npy`` to receive the hard
assignment ``argmax_k r_nk`` of one local step of the fitted model on the same data, BNPy's own
``calc_local_params``; for sequences, the most probable state of every time step), and
``doc_range`` (path of an int ``.npy`` of sequence boundaries: the data are sequences,
``bnpy.data.GroupXData``, for the HMMs).

Written JSON: ``seconds`` (wall-clock of ``bnpy.run``: data iterator, initialisation and all
laps), ``fit_seconds`` (from the start of the first lap, BNPy's own clock), ``laps``,
``lap_history``/``elapsed_history`` (BNPy's trace, seconds since the first lap started),
``K`` (represented clusters), ``counts`` (N_k of the final whole-dataset summaries), ``loss``
(BNPy's final loss, its own scaling of the negative ELBO), ``weights`` (E_q[π_k] renormalised
over the K represented clusters), ``means`` and ``covariances`` (posterior means E_q[μ_k],
E_q[Σ_k] = B_k / (ν_k − D − 1); zero means for ``ZeroMeanGauss``), ``status`` and ``blas``
(threadpoolctl's view of NumPy's BLAS, if available).
"""

import inspect
import json
import os
import sys
import tempfile
import time

# BNPy 0.1.7's Runner calls inspect.getargspec, removed in Python 3.11: provide the 4-tuple it
# unpacks (args, varargs, varkw, defaults) from getfullargspec. BNPy itself is left unmodified.
if not hasattr(inspect, "getargspec"):
    inspect.getargspec = lambda func: tuple(inspect.getfullargspec(func)[:4])


def _blas_info():
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return [{"OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
                 "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")}]
    return [{k: d.get(k) for k in ("internal_api", "version", "num_threads", "threading_layer", "architecture")}
            for d in threadpool_info()]


def main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    # BNPy prints some move progress to stdout even with doWriteStdOut=False; the caller reads
    # only the JSON file.
    import bnpy
    import numpy as np

    X = np.load(spec["data"])
    if spec.get("doc_range"):  # sequences (HMMs): doc_range[i]:doc_range[i+1] is sequence i
        data = bnpy.data.GroupXData(X=X, doc_range=np.load(spec["doc_range"]))
    else:
        data = bnpy.data.XData(X=X)
    kwargs = dict(spec["kwargs"])
    # doSaveToDisk=False crashes BNPy 0.1.7's birth move (BLogger opens a per-uid log file under
    # the task output path, which is then None), so BNPy writes its usual output (text traces,
    # logs, the final model; `saveEvery=-1`: no intermediate snapshots) to a temporary directory
    # that is removed afterwards.
    # (`keep_output` in the spec: keep BNPy's output there instead, for inspecting its logs.)
    with tempfile.TemporaryDirectory(prefix="bnpy-bench-") as outdir:
        outdir = spec.get("keep_output") or outdir
        kwargs.setdefault("saveEvery", -1)
        t0 = time.perf_counter()
        hmodel, info = bnpy.run(data, spec["alloc"], spec["obs"], spec["alg"], doSaveToDisk=True,
                                doWriteStdOut=False, output_path=outdir, **kwargs)
        seconds = time.perf_counter() - t0

    obs = hmodel.obsModel
    post = obs.Post
    K = int(post.K)
    D = int(post.D)
    w = np.asarray(hmodel.allocModel.get_active_comp_probs(), dtype=np.float64)
    w = w / w.sum()
    covs = np.asarray(post.B, dtype=np.float64) / (np.asarray(post.nu, dtype=np.float64)[:, None, None] - D - 1)
    if hasattr(post, "m"):
        means = np.asarray(post.m, dtype=np.float64)
    else:
        means = np.zeros((K, D))
    laps = np.asarray(info["lap_history"], dtype=np.float64)
    elapsed = np.asarray(info["elapsed_time_sec_history"], dtype=np.float64)
    out = {
        "seconds": seconds,
        "fit_seconds": float(info.get("elapsedTimeInSec", float("nan"))),
        "laps": float(laps[-1]) if laps.size else 0.0,
        "lap_history": laps.tolist(),
        "elapsed_history": elapsed.tolist(),
        "K_history": np.asarray(info["K_history"]).tolist(),
        "K": K,
        "loss": float(info["loss"]),
        "status": str(info.get("status")),
        "counts": np.asarray(info["SS"].getCountVec(), dtype=np.float64).tolist() if "SS" in info else [],
        "weights": w.tolist(),
        "means": means.tolist(),
        "covariances": covs.tolist(),
        "blas": _blas_info(),
        "numpy": np.__version__,
        "bnpy_file": bnpy.__file__,
    }
    if spec.get("labels"):
        lp_kwargs = {}
        if "nnzPerRowLP" in kwargs:
            lp_kwargs["nnzPerRowLP"] = kwargs["nnzPerRowLP"]
        t1 = time.perf_counter()
        LP = hmodel.calc_local_params(data, **lp_kwargs)
        if "resp" in LP:
            labels = np.asarray(LP["resp"]).argmax(axis=1)
        else:
            labels = np.asarray(LP["spR"].argmax(axis=1)).ravel()
        np.save(spec["labels"], labels.astype(np.int64))
        out["labels_seconds"] = time.perf_counter() - t1
    with open(spec["out"], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main(sys.argv[1])
