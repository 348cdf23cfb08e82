"""What the default moves add to a memoized lap at large K (issue 13 item 4).

Zero-mean 8×8 image patches (``bnpcore.datasets.load_image_patches``, ``--n-samples`` rows),
``DPMixture(obs="zero_mean_gauss", algorithm="memoized", n_batches=4)`` from ``--k`` clusters
chosen at random from the data, dense or ``top_l=4`` responsibilities, with and without the
default moves, ``--laps`` laps. Reported per configuration: seconds per lap after the first
(the first lap is dense in every configuration), and, with moves, the seconds spent in the
local steps, in the moves' hooks (planning, per-batch bookkeeping, evaluation) and in the
per-batch ELBO checks. Then the two ratios the issue sets targets for: moves overhead per lap
(target ≤ 30 % at K = 200, ≤ 50 % at K = 800) and ``top_l=4`` speed-up with moves (target ≥ 2×
at K = 200, ≥ 2.5× at K = 800).

``--from-lap F`` averages laps F and later (default 2): the fits drop from K = 200 to ~90 clusters
and from 800 to ~370 within four laps, so ``--laps 12 --from-lap 5`` measures the laps at the
size the fit runs at. With moves, the moves' time is also split by move: the births' fresh fits
(planning), merge planning (m-scores), merge evaluation, deletes (planning, subsample steps,
evaluation) and the births' evaluation. (The columns overlap: the moves' hooks include the local
steps and ELBOs they run themselves, e.g. a delete's subsample steps.)

Usage: ``python benches/bench_moves_cost.py [--k 200 800] [--n-samples 100000] [--laps 4] [--from-lap 2]``
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, save, table


class _Clock:
    """Seconds per (lap, key) of wrapped methods; the lap is counted by ``MoveManager.start_lap``
    (with moves) or ``Model.local_step`` calls are attributed to the lap in progress."""

    def __init__(self):
        self.t = {}
        self.lap = 1

    def wrap(self, obj, name, key, new_lap=False):
        fn = getattr(obj, name)

        def timed(*a, **k):
            if new_lap:
                self.lap += 1
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.t[self.lap, key] = self.t.get((self.lap, key), 0.0) + time.perf_counter() - t0

        setattr(obj, name, timed)

    def per_lap(self, key, first, last):
        return float(np.mean([self.t.get((lap, key), 0.0) for lap in range(first, last + 1)]))


#: per-move hooks timed separately (class path, method, key)
_PARTS = [
    ("bnpcore.moves.birth.BirthMove", "plan", "births' fits"),
    ("bnpcore.moves.birth.BirthMove", "evaluate", "births' evaluation"),
    ("bnpcore.moves.merge.MergeMove", "plan", "merge planning"),
    ("bnpcore.moves.merge.MergeMove", "evaluate", "merge evaluation"),
    ("bnpcore.moves.delete.DeleteMove", "plan", "deletes"),
    ("bnpcore.moves.delete.DeleteMove", "evaluate", "deletes"),
]


def run(X, K, top_l, moves, laps, first):
    import importlib

    import bnpcore
    from bnpcore.model import Model
    from bnpcore.moves.manager import MoveManager

    clock = _Clock()
    saved = {(MoveManager, n): getattr(MoveManager, n) for n in ("start_lap", "batch_options", "after_batch", "end_lap")}
    saved[(Model, "local_step")], saved[(Model, "elbo")] = Model.local_step, Model.elbo
    parts = []
    for path, name, key in _PARTS:
        mod, cls = path.rsplit(".", 1)
        owner = getattr(importlib.import_module(mod), cls)
        saved[(owner, name)] = getattr(owner, name)
        parts.append((owner, name, key))
    # lap boundaries: MoveManager.start_lap with moves; without moves, every lap starts with the
    # first batch's local step (4 batches a lap)
    calls = [0]
    ls = Model.local_step

    def local_step(self, *a, **k):
        if not moves and a and getattr(a[0], "shape", (0,))[0] >= X.shape[0] // 8:
            calls[0] += 1
            if calls[0] > 1 and calls[0] % 4 == 1:
                clock.lap += 1
        return ls(self, *a, **k)

    Model.local_step = local_step
    clock.wrap(MoveManager, "start_lap", "moves", new_lap=True)
    for n in ("batch_options", "after_batch", "end_lap"):
        clock.wrap(MoveManager, n, "moves")
    clock.wrap(Model, "local_step", "local")
    clock.wrap(Model, "elbo", "elbo")
    for owner, name, key in parts:
        clock.wrap(owner, name, key)
    try:
        m = bnpcore.DPMixture(obs="zero_mean_gauss", n_components=K, algorithm="memoized", n_batches=4,
                              init="random_from_data", top_l=top_l, moves=None if moves else (),
                              max_laps=laps, tol=0, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            m.fit(X)
            total = time.perf_counter() - t0
    finally:
        for (owner, n), f in saved.items():
            setattr(owner, n, f)
    sec = np.diff(np.r_[0.0, m.history_["seconds"]])
    out = {"per_lap": float(sec[first - 1:].mean()), "first": float(sec[0]), "total": total, "K_end": int(m.n_components_),
           "clusters": int(m.summaries_.K)}
    for key in {k for _, k in clock.t}:
        out[key] = clock.per_lap(key, first, laps)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, nargs="+", default=[200, 800])
    ap.add_argument("--n-samples", type=int, default=100_000)
    ap.add_argument("--laps", type=int, default=4)
    ap.add_argument("--from-lap", type=int, default=2, help="average the laps from this one on")
    args = ap.parse_args(argv)
    import bnpcore

    first = max(1, min(args.from_lap, args.laps))
    X = bnpcore.datasets.load_image_patches(stride=2)[: args.n_samples]
    rows, split, out = [], [], {}
    keys = list(dict.fromkeys(k for _, _, k in _PARTS))
    for K in args.k:
        res = {}
        for top_l in (None, 4):
            for moves in (False, True):
                r = run(X, K, top_l, moves, args.laps, first)
                res[(top_l, moves)] = r
                mode = "dense" if top_l is None else f"top_l={top_l}"
                rows.append([K, mode, "default" if moves else "none", f"{r['per_lap']:.3f}", f"{r.get('local', 0):.3f}",
                             f"{r.get('moves', 0):.3f}", f"{r.get('elbo', 0):.3f}", r["clusters"], r["K_end"]])
                if moves:
                    split.append([K, mode] + [f"{r.get(k, 0):.3f}" for k in keys])
        over_d = res[(None, True)]["per_lap"] / res[(None, False)]["per_lap"] - 1
        over_s = res[(4, True)]["per_lap"] / res[(4, False)]["per_lap"] - 1
        speed = res[(None, True)]["per_lap"] / res[(4, True)]["per_lap"]
        out[K] = {"overhead_dense": over_d, "overhead_top_l": over_s, "top_l_speedup_with_moves": speed,
                  "runs": {f"{k[0]}-{k[1]}": v for k, v in res.items()}}
    print(f"{X.shape[0]:,} × {X.shape[1]} patches, memoized, 4 batches, {args.laps} laps; seconds per lap, mean of laps {first}+")
    print(table(rows, ["K", "local step", "moves", "s / lap", "local s / lap", "moves s / lap", "ELBO s / lap", "clusters at end",
                       "n_components_"]))
    print("the moves' seconds per lap, by move:")
    print(table(split, ["K", "local step"] + keys))
    for K, o in out.items():
        print(f"K={K}: moves add {100 * o['overhead_dense']:.0f} % (dense), {100 * o['overhead_top_l']:.0f} % (top_l=4); "
              f"top_l=4 with moves is {o['top_l_speedup_with_moves']:.2f}x faster per lap than dense with moves")
    save("bench_moves_cost", {"machine": machine(), "n": int(X.shape[0]), "laps": args.laps, "from_lap": first, "results": out})


if __name__ == "__main__":
    main()
