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

Usage: ``python benches/bench_moves_cost.py [--k 200 800] [--n-samples 100000] [--laps 4]``
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
    def __init__(self):
        self.t = {}

    def wrap(self, obj, name, key):
        fn = getattr(obj, name)

        def timed(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.t[key] = self.t.get(key, 0.0) + time.perf_counter() - t0

        setattr(obj, name, timed)


def run(X, K, top_l, moves, laps):
    import bnpcore
    from bnpcore.model import Model
    from bnpcore.moves.manager import MoveManager

    clock = _Clock()
    saved = {n: getattr(MoveManager, n) for n in ("start_lap", "batch_options", "after_batch", "end_lap")}
    saved_ls, saved_elbo = Model.local_step, Model.elbo
    for n in saved:
        clock.wrap(MoveManager, n, "moves")
    clock.wrap(Model, "local_step", "local")
    clock.wrap(Model, "elbo", "elbo")
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
        for n, f in saved.items():
            setattr(MoveManager, n, f)
        Model.local_step, Model.elbo = saved_ls, saved_elbo
    sec = np.diff(np.r_[0.0, m.history_["seconds"]])
    per_lap = float(sec[1:].mean())
    return {"per_lap": per_lap, "first": float(sec[0]), "total": total, "K_end": int(m.n_components_), **clock.t}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, nargs="+", default=[200, 800])
    ap.add_argument("--n-samples", type=int, default=100_000)
    ap.add_argument("--laps", type=int, default=4)
    args = ap.parse_args(argv)
    import bnpcore

    X = bnpcore.datasets.load_image_patches(stride=2)[: args.n_samples]
    rows, out = [], {}
    for K in args.k:
        res = {}
        for top_l in (None, 4):
            for moves in (False, True):
                r = run(X, K, top_l, moves, args.laps)
                res[(top_l, moves)] = r
                rows.append([K, "dense" if top_l is None else f"top_l={top_l}", "default" if moves else "none",
                             f"{r['per_lap']:.2f}", f"{r.get('local', 0) / args.laps:.2f}", f"{r.get('moves', 0) / args.laps:.2f}",
                             f"{r.get('elbo', 0) / args.laps:.2f}", r["K_end"]])
        over_d = res[(None, True)]["per_lap"] / res[(None, False)]["per_lap"] - 1
        over_s = res[(4, True)]["per_lap"] / res[(4, False)]["per_lap"] - 1
        speed = res[(None, True)]["per_lap"] / res[(4, True)]["per_lap"]
        out[K] = {"overhead_dense": over_d, "overhead_top_l": over_s, "top_l_speedup_with_moves": speed,
                  "runs": {f"{k[0]}-{k[1]}": v for k, v in res.items()}}
    print(f"{X.shape[0]:,} × {X.shape[1]} patches, memoized, 4 batches, {args.laps} laps (per-lap columns: mean of laps 2+ / all laps)")
    print(table(rows, ["K", "local step", "moves", "s / lap", "local s / lap", "moves s / lap", "ELBO s / lap", "K end"]))
    for K, o in out.items():
        print(f"K={K}: moves add {100 * o['overhead_dense']:.0f} % (dense), {100 * o['overhead_top_l']:.0f} % (top_l=4); "
              f"top_l=4 with moves is {o['top_l_speedup_with_moves']:.2f}x faster per lap than dense with moves")
    save("bench_moves_cost", {"machine": machine(), "n": int(X.shape[0]), "laps": args.laps, "results": out})


if __name__ == "__main__":
    main()
