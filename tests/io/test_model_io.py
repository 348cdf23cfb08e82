"""save/load, warm starts, pickling, checkpoints (atomic, SIGKILL-safe) and bad model files."""

import json
import os
import pickle
import re
import subprocess
import sys
import textwrap
import zipfile
import zlib

import bnpcore
import numpy as np
import pytest
from _helpers import family_data, family_estimator, fit_quietly
from bnpcore import DPMixture, FiniteMixture
from bnpcore.exceptions import ModelFileError, ParameterError
from bnpcore.io import FORMAT_VERSION


def _data(n=600, d=3, k=4, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.integers(0, k, size=n)
    return rng.normal(0, 4, size=(k, d))[z] + rng.normal(size=(n, d))


def _same_state(a, b):
    for k in ("lap", "elbo", "n_components"):
        assert np.array_equal(a.history_[k], b.history_[k]), k
    sa, sb = a.state_, b.state_
    assert [m is None for m in sa.memos] == [m is None for m in sb.memos]
    def live(s):
        return [s.stats, *(m for m in s.memos if m is not None), *s.frozen]
    for x, y in zip(live(sa), live(sb)):
        for f in ("N", "S", "H", "uids"):
            assert np.array_equal(getattr(x, f), getattr(y, f)), f
        assert x.h == y.h
    assert len(sa.memos) == len(sb.memos) and len(sa.frozen) == len(sb.frozen)
    assert sa.next_uid == sb.next_uid and sa.lap == sb.lap and sa.stochastic_step == sb.stochastic_step
    assert sa.rng_order.bit_generator.state == sb.rng_order.bit_generator.state
    assert sa.rng_moves.bit_generator.state == sb.rng_moves.bit_generator.state
    assert sa.batch_elbo == sb.batch_elbo
    assert a.moves_log_ == b.moves_log_


@pytest.mark.parametrize(
    "cls,kw",
    [
        (DPMixture, dict(obs="gauss")),
        (DPMixture, dict(obs="diag_gauss", algorithm="memoized", n_batches=3, moves=())),
        (DPMixture, dict(obs="gauss", algorithm="memoized", n_batches=3)),  # the default moves
        (FiniteMixture, dict(obs="zero_mean_gauss", prior_mean=np.zeros(3))),
        (DPMixture, dict(obs="gauss", algorithm="stochastic", n_batches=2)),
    ],
)
def test_save_load_round_trip_identical_predictions(tmp_path, cls, kw):
    X = _data()
    est = fit_quietly(cls(n_components=5, random_state=0, max_laps=5, **kw), X)
    path = tmp_path / "model.npz"
    est.save(path)
    again = bnpcore.load(path)
    assert type(again) is cls
    assert repr(again) == repr(est)
    assert np.array_equal(again.predict_proba(X), est.predict_proba(X))
    assert np.array_equal(again.predict(X), est.predict(X))
    assert np.array_equal(again.score_samples(X), est.score_samples(X))
    for attr in ("weights_", "means_", "covariances_", "counts_"):
        if hasattr(est, attr):
            assert np.array_equal(getattr(again, attr), getattr(est, attr)), attr
    assert again.elbo_ == est.elbo_ and again.n_components_ == est.n_components_
    assert again.n_iter_ == est.n_iter_ and again.converged_ == est.converged_
    assert np.array_equal(again.history_["seconds"], est.history_["seconds"])
    _same_state(again, est)
    assert again.obs_model_.prior.keys() == est.obs_model_.prior.keys()
    for k, v in est.obs_model_.prior.items():
        assert np.array_equal(again.obs_model_.prior[k], v)


def test_unfitted_round_trip_and_module_level_functions(tmp_path):
    est = DPMixture(obs="mult", n_components=7, gamma=2.5, moves=("merge",), callback=print)
    bnpcore.io.save(est, tmp_path / "u.npz")
    again = bnpcore.load(tmp_path / "u.npz")
    assert not hasattr(again, "state_")
    p = again.get_params()
    assert p["n_components"] == 7 and p["gamma"] == 2.5 and p["moves"] == ("merge",) and p["obs"] == "mult"
    assert p["callback"] is None  # callables cannot be stored without pickle


def test_dask_client_is_never_saved(tmp_path):
    """A scheduler address is JSON-able but, like a Client object, it is not part of the model:
    saved as null (listed as dropped), and a loaded model has client=None, so a warm start does
    not try to reach a cluster that may be gone. Files that hold an address load without it."""
    address = "tcp://x:1"  # never contacted: nothing here connects
    X = _data(n=200)
    models = [
        DPMixture(backend="dask", algorithm="memoized", n_batches=2, client=address),
        bnpcore.HDPTopicModel(backend="dask", client=address),
        bnpcore.FiniteHMM(client=address),
        fit_quietly(DPMixture(n_components=2, max_laps=2, random_state=0, backend="local", client=address), X),
    ]
    for i, est in enumerate(models):
        path = tmp_path / f"m{i}.npz"
        est.save(path)
        with np.load(path) as npz:
            meta = json.loads(npz["__meta__"].tobytes())
        assert meta["params"]["client"] is None and "client" in meta["dropped_params"]
        assert address not in json.dumps(meta)
        again = bnpcore.load(path)
        assert again.get_params()["client"] is None and again.get_params()["backend"] == est.get_params()["backend"]
    DPMixture().save(tmp_path / "none.npz")  # an unset client is not "dropped"
    with np.load(tmp_path / "none.npz") as npz:
        assert json.loads(npz["__meta__"].tobytes())["dropped_params"] == []
    # a file written when the address was stored
    _rewrite_meta(tmp_path / "m3.npz", tmp_path / "old.npz", lambda m: m["params"].update(client=address))
    old = bnpcore.load(tmp_path / "old.npz")
    assert old.get_params()["client"] is None
    old.set_params(warm_start=True, max_laps=1)
    fit_quietly(old, X)  # continues locally


@pytest.mark.parametrize("algorithm,n_batches", [("memoized", 3), ("full", 1)])
def test_warm_start_3_plus_save_load_plus_3_equals_6_laps(tmp_path, algorithm, n_batches):
    X = _data(seed=1)
    kw = dict(n_components=6, algorithm=algorithm, n_batches=n_batches, random_state=2, tol=0, moves=())
    six = fit_quietly(DPMixture(max_laps=6, **kw), X)
    three = fit_quietly(DPMixture(max_laps=3, **kw), X)
    three.save(tmp_path / "m.npz")
    resumed = bnpcore.load(tmp_path / "m.npz")
    resumed.set_params(warm_start=True)
    fit_quietly(resumed, X)
    _same_state(resumed, six)
    assert resumed.n_iter_ == 3
    # and without the file in between
    three.set_params(warm_start=True)
    fit_quietly(three, X)
    _same_state(three, six)


def _family_case(name, obs):
    """(estimator class, data, fit keywords) of a small fit of ``name`` with observation model ``obs``."""
    from _helpers import synthetic_data

    cls = getattr(bnpcore, name)
    if "Topic" in name:
        X, _ = bnpcore.datasets.make_bars(n_docs=80, n_tokens=40, random_state=3)
        return cls, X, {}
    if obs == "ar_gauss":
        X, lengths = bnpcore.datasets.make_sticky_hmm(n_seqs=4, seq_len=60, random_state=0)[:2]
        return cls, X, {"lengths": lengths}
    X, _ = synthetic_data(obs, n=240)
    return cls, X, ({"lengths": [60] * 4} if "HMM" in name else {})


@pytest.mark.parametrize(
    "name,obs,kw",
    [
        ("DPMixture", "diag_gauss", dict(algorithm="memoized", n_batches=2)),
        ("DPMixture", "zero_mean_gauss", dict(algorithm="memoized", n_batches=2, top_l=2)),
        ("DPMixture", "mult", dict(algorithm="memoized", n_batches=2, top_l=2)),
        ("DPMixture", "bern", dict(algorithm="stochastic", n_batches=2)),
        ("FiniteMixture", "bern", dict()),
        ("HDPTopicModel", None, dict(algorithm="memoized", n_batches=2, top_l=2)),
        ("FiniteTopicModel", None, dict(algorithm="stochastic", n_batches=2)),
        ("HDPHMM", "ar_gauss", dict(algorithm="memoized", n_batches=2)),
        ("HDPHMM", "mult", dict()),
        ("FiniteHMM", "diag_gauss", dict(algorithm="memoized", n_batches=2)),
        ("FiniteHMM", "zero_mean_gauss", dict(algorithm="stochastic", n_batches=2)),
    ],
)
def test_every_family_and_observation_model_3_plus_save_load_plus_3_equals_6_laps(tmp_path, name, obs, kw):
    """The families and observation models (and top_l, stochastic) the Gaussian DPMixture tests
    above do not cover: 3 laps, save, load, 3 more laps reproduce the 6-lap fit."""
    cls, X, fit_kw = _family_case(name, obs)
    kw = dict(kw, n_components=3, random_state=0, tol=0, **({} if obs is None else {"obs": obs}))
    six = fit_quietly(cls(max_laps=6, **kw), X, **fit_kw)
    three = fit_quietly(cls(max_laps=3, **kw), X, **fit_kw)
    assert not three.converged_ and len(six.history_["lap"]) > 3  # laps after the save are run and compared
    three.save(tmp_path / "m.npz")
    resumed = bnpcore.load(tmp_path / "m.npz")
    resumed.set_params(warm_start=True)
    fit_quietly(resumed, X, **fit_kw)
    _same_state(resumed, six)
    np.testing.assert_array_equal(resumed.summaries_.S, six.summaries_.S)
    method = "transform" if "Topic" in name else "predict_proba"
    np.testing.assert_array_equal(getattr(resumed, method)(X, **fit_kw), getattr(six, method)(X, **fit_kw))


def _moves_data():
    """Five separated clusters started from two components: births, merges and deletes are
    proposed and some are accepted within the first laps."""
    from bnpcore.datasets import make_gaussian_mixture

    X, _ = make_gaussian_mixture(n_samples=1200, n_features=2, n_components=5, separation=5.0, random_state=4)
    return X


_DEFAULT_MOVES_KW = dict(n_components=2, algorithm="memoized", n_batches=3, random_state=2, tol=0)  # moves: the default


def test_default_moves_are_on_and_accepted_in_the_persistence_fits():
    """The persistence tests below use what users get: a memoized DPMixture with its default
    moves (birth, merge, delete), with moves accepted in laps 1-3 and in laps 4-6."""
    six = fit_quietly(DPMixture(max_laps=6, **_DEFAULT_MOVES_KW), _moves_data())
    assert DPMixture(**_DEFAULT_MOVES_KW)._moves_tuple() == ("birth", "merge", "delete")
    laps = {r["lap"] for r in six.moves_log_ if r["accepted"]}
    assert laps & {1, 2, 3} and laps & {4, 5, 6}, six.moves_log_


def test_moves_log_survives_save_load_and_pickle(tmp_path):
    est = fit_quietly(DPMixture(max_laps=4, **_DEFAULT_MOVES_KW), _moves_data())
    assert any(r["accepted"] for r in est.moves_log_)
    est.save(tmp_path / "m.npz")
    for again in (bnpcore.load(tmp_path / "m.npz"), pickle.loads(pickle.dumps(est))):
        assert again.moves_log_ == est.moves_log_
        assert again.state_.moves_log == est.state_.moves_log
        _same_state(again, est)


def test_default_moves_3_plus_save_load_plus_3_equals_6_laps(tmp_path):
    X = _moves_data()
    six = fit_quietly(DPMixture(max_laps=6, **_DEFAULT_MOVES_KW), X)
    three = fit_quietly(DPMixture(max_laps=3, **_DEFAULT_MOVES_KW), X)
    three.save(tmp_path / "m.npz")
    resumed = bnpcore.load(tmp_path / "m.npz")
    resumed.set_params(warm_start=True)
    fit_quietly(resumed, X)
    _same_state(resumed, six)


def test_default_moves_3_plus_in_memory_warm_start_3_equals_6_laps():
    X = _moves_data()
    six = fit_quietly(DPMixture(max_laps=6, **_DEFAULT_MOVES_KW), X)
    three = fit_quietly(DPMixture(max_laps=3, **_DEFAULT_MOVES_KW), X)
    three.set_params(warm_start=True)
    fit_quietly(three, X)
    _same_state(three, six)


def test_default_moves_checkpoint_after_3_laps_resumes_to_6(tmp_path):
    X = _moves_data()
    six = fit_quietly(DPMixture(max_laps=6, **_DEFAULT_MOVES_KW), X)
    ckpt = tmp_path / "ckpt.npz"
    fit_quietly(DPMixture(max_laps=3, checkpoint_path=str(ckpt), **_DEFAULT_MOVES_KW), X)
    resumed = bnpcore.load(ckpt)
    assert resumed.state_.lap == 3
    resumed.set_params(warm_start=True, checkpoint_path=None)
    fit_quietly(resumed, X)
    _same_state(resumed, six)


def test_default_moves_pickle_round_trip_then_continue_identically():
    X = _moves_data()
    est = fit_quietly(DPMixture(max_laps=3, **_DEFAULT_MOVES_KW), X)
    again = pickle.loads(pickle.dumps(est))
    _same_state(again, est)
    again.set_params(warm_start=True, max_laps=2)
    est.set_params(warm_start=True, max_laps=2)
    fit_quietly(again, X)
    fit_quietly(est, X)
    _same_state(again, est)


def test_pickle_round_trip(tmp_path):
    X = _data()
    est = fit_quietly(DPMixture(n_components=5, random_state=0, max_laps=4, algorithm="memoized", n_batches=3, moves=()), X)
    again = pickle.loads(pickle.dumps(est))
    assert np.array_equal(again.predict_proba(X), est.predict_proba(X))
    _same_state(again, est)
    again.set_params(warm_start=True, max_laps=2)
    est.set_params(warm_start=True, max_laps=2)
    fit_quietly(again, X)
    fit_quietly(est, X)
    _same_state(again, est)


def test_checkpoint_written_every_lap(tmp_path):
    X = _data()
    path = tmp_path / "ckpt.npz"
    laps = []

    def cb(model, info):
        if os.path.exists(path):
            laps.append(bnpcore.load(path).state_.lap)

    est = fit_quietly(DPMixture(n_components=4, random_state=0, max_laps=4, tol=0, checkpoint_path=str(path), callback=cb), X)
    assert laps == [1, 2, 3]  # the callback runs before that lap's checkpoint is written
    assert bnpcore.load(path).state_.lap == 4
    assert not [f for f in os.listdir(tmp_path) if ".tmp-" in f]
    _same_state(bnpcore.load(path), est)


def test_checkpoint_path_naming_the_data_file_is_refused_before_it_is_overwritten(tmp_path):
    """The data file as checkpoint_path (given as the path, in a list of batch paths, memory-mapped
    or as eval_X) would be replaced by the first checkpoint: the fit is refused and the data stay."""
    X = _data(n=200)
    data = tmp_path / "data.npy"
    np.save(data, X)
    raw = data.read_bytes()
    fits = [
        lambda est: est.fit(str(data)),
        lambda est: est.fit([data, data]),
        lambda est: est.fit(np.load(data, mmap_mode="r")),
        lambda est: est.fit(X, eval_X=np.load(data, mmap_mode="r")),
    ]
    for fit in fits:
        est = DPMixture(n_components=2, random_state=0, max_laps=2, checkpoint_path=tmp_path / "." / "data.npy")
        with pytest.raises(ParameterError, match="checkpoint_path") as info:
            fit(est)
        assert repr(str(data)) in str(info.value) and not hasattr(est, "state_")
        assert data.read_bytes() == raw
    X_hmm, lengths = family_data("hmm")
    np.save(data, X_hmm)
    with pytest.raises(ParameterError, match="checkpoint_path"):
        family_estimator("hmm", max_laps=1, checkpoint_path=data).fit(str(data), lengths=lengths)
    assert np.array_equal(np.load(data), X_hmm)


def test_save_errors_name_the_destination_not_the_temporary_file(tmp_path):
    """A destination that cannot be written raises the OSError about that path (or its missing
    directory), never about the hidden ``.<name>.tmp-<pid>-<random>`` file; nothing is left behind."""
    est = fit_quietly(DPMixture(n_components=2, random_state=0, max_laps=2), _data(n=200))
    target = tmp_path / "nowhere" / "m.npz"
    for model in (est, DPMixture()):
        with pytest.raises(FileNotFoundError) as info:
            model.save(target)
        assert info.value.filename == str(target) and ".tmp-" not in str(info.value)
        assert repr(str(target.parent)) in str(info.value) and "does not exist" in str(info.value)
    (tmp_path / "taken").mkdir()
    with pytest.raises(IsADirectoryError) as info:
        bnpcore.io.save(est, tmp_path / "taken")
    assert info.value.filename == str(tmp_path / "taken") and ".tmp-" not in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert sorted(os.listdir(tmp_path)) == ["taken"] and os.listdir(tmp_path / "taken") == []
    # a checkpoint path in a missing directory: the error names the checkpoint path
    with pytest.raises(FileNotFoundError) as info:
        fit_quietly(DPMixture(n_components=2, max_laps=2, checkpoint_path=str(target)), _data(n=200))
    assert info.value.filename == str(target)


def test_overlapping_saves_to_one_path_each_write_their_own_temporary_file(tmp_path, monkeypatch):
    """A second save to the same path starting while the first is writing (two threads of one
    process: the same pid) neither fails the first nor mixes their bytes: each save has its own
    temporary file, and the path ends up holding the complete file of the save that finished last."""
    X = _data(n=200)
    first = fit_quietly(DPMixture(n_components=2, random_state=0, max_laps=2), X)
    second = fit_quietly(DPMixture(n_components=3, random_state=1, max_laps=3, moves=()), X)
    path = tmp_path / "m.npz"
    savez, nested = np.savez, []

    def savez_with_an_overlapping_save(fh, **arrays):
        savez(fh, **arrays)
        if not nested:  # the second save runs from start to end before the first is renamed into place
            nested.append(True)
            second.save(path)

    monkeypatch.setattr(np, "savez", savez_with_an_overlapping_save)
    first.save(path)
    monkeypatch.setattr(np, "savez", savez)
    assert nested
    _same_state(bnpcore.load(path), first)
    assert os.listdir(tmp_path) == ["m.npz"]


_KILL_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, warnings
    import numpy as np
    import bnpcore
    from bnpcore import DPMixture
    from bnpcore.data.sources import ArrayBatches

    X = np.load(sys.argv[1])
    ckpt, kill_at, mode = sys.argv[2], int(sys.argv[3]), sys.argv[4]
    moves = None if sys.argv[5] == "default" else ()
    calls = {"get": 0, "save": 0}
    if mode == "batch":  # SIGKILL in the middle of a lap, at the kill_at-th batch read
        orig = ArrayBatches.get
        def get(self, b):
            calls["get"] += 1
            if calls["get"] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return orig(self, b)
        ArrayBatches.get = get
    else:  # SIGKILL while the kill_at-th checkpoint is being written
        import bnpcore.io._format as fmt
        orig_savez = np.savez
        def savez(fh, **arrays):
            calls["save"] += 1
            orig_savez(fh, **arrays)
            if calls["save"] == kill_at:
                fh.flush()
                os.kill(os.getpid(), signal.SIGKILL)
        fmt.np = type("np_proxy", (), {"__getattr__": lambda self, k: getattr(np, k), "savez": staticmethod(savez)})()
    warnings.simplefilter("error")  # as under pytest: an ELBO decrease must fail the run
    warnings.simplefilter("ignore", bnpcore.exceptions.ConvergenceWarning)
    DPMixture(n_components=6, algorithm="memoized", n_batches=4, random_state=3, tol=0, max_laps=6,
              moves=moves, checkpoint_path=ckpt).fit(X)
    """
)


@pytest.mark.parametrize("moves", ["default", "none"])
@pytest.mark.parametrize("mode,kill_at,expect_lap", [("batch", 4 * 3 + 2, 3), ("save", 4, 3)])
def test_sigkill_mid_lap_resumes_from_last_complete_lap(tmp_path, mode, kill_at, expect_lap, moves):
    X = _data(n=800, seed=5)
    np.save(tmp_path / "x.npy", X)
    ckpt = tmp_path / "ckpt.npz"
    script = tmp_path / "run.py"
    script.write_text(_KILL_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "x.npy"), str(ckpt), str(kill_at), mode, moves],
                          capture_output=True, timeout=120, check=False)
    assert proc.returncode == -9, proc.stderr.decode()
    resumed = bnpcore.load(ckpt)
    assert resumed.state_.lap == expect_lap
    resumed.set_params(warm_start=True, max_laps=6 - expect_lap)
    fit_quietly(resumed, X)
    reference = fit_quietly(DPMixture(n_components=6, algorithm="memoized", n_batches=4, random_state=3, tol=0, max_laps=6,
                                      moves=None if moves == "default" else ()), X)
    _same_state(resumed, reference)


# ------------------------------------------------------------------ bad files
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    X = _data()
    est = fit_quietly(DPMixture(n_components=4, random_state=0, max_laps=3, algorithm="memoized", n_batches=2, moves=()), X)
    path = tmp_path_factory.mktemp("files") / "m.npz"
    est.save(path)
    return path


def test_missing_file(tmp_path):
    with pytest.raises(ModelFileError, match="no such"):
        bnpcore.load(tmp_path / "absent.npz")


def test_truncated_files_raise(tmp_path, saved):
    raw = saved.read_bytes()
    for cut in (0, 10, len(raw) // 3, len(raw) // 2, len(raw) - 30, len(raw) - 1):
        p = tmp_path / f"t{cut}.npz"
        p.write_bytes(raw[:cut])
        with pytest.raises(ModelFileError):
            bnpcore.load(p)


def test_flipped_bytes_raise(tmp_path, saved):
    raw = bytearray(saved.read_bytes())
    original, X, intact = bnpcore.load(saved), _data(), 0
    rng = np.random.default_rng(0)
    for pos in rng.choice(len(raw), size=40, replace=False):
        bad = bytearray(raw)
        bad[pos] ^= 0xFF
        p = tmp_path / "f.npz"
        p.write_bytes(bytes(bad))
        try:
            est = bnpcore.load(p)
        except ModelFileError as exc:
            assert isinstance(exc, ValueError)
            continue
        # a flip in zip padding/unused header bytes may be harmless: then the model must be intact,
        # every array and every parameter, not just N
        _same_state(est, original)
        assert repr(est) == repr(original) and est.get_params().keys() == original.get_params().keys()
        for k, v in original.get_params().items():
            assert np.array_equal(est.get_params()[k], v) if isinstance(v, np.ndarray) else est.get_params()[k] == v, k
        assert np.array_equal(est.predict_proba(X), original.predict_proba(X))
        assert est.elbo_ == original.elbo_ and np.array_equal(est.history_["seconds"], original.history_["seconds"])
        for k, v in original.obs_model_.prior.items():
            assert np.array_equal(est.obs_model_.prior[k], v), k
        intact += 1
    assert intact < 40  # most flips are detected


def test_garbage_and_foreign_files(tmp_path):
    p = tmp_path / "g.npz"
    p.write_bytes(b"this is not a model")
    with pytest.raises(ModelFileError):
        bnpcore.load(p)
    np.savez(tmp_path / "other.npz", a=np.arange(3))
    with pytest.raises(ModelFileError):
        bnpcore.load(tmp_path / "other.npz")


def test_files_that_are_not_zip_archives_are_refused_as_such(tmp_path, saved):
    """A text file, a pickle, a .npy array, an empty file: refused as not being a zip archive,
    without numpy's advice to load them with pickle."""
    files = {"notes.txt": b"a text file\n", "model.pkl": pickle.dumps(bnpcore.load(saved)), "empty.npz": b""}
    for name, raw in files.items():
        (tmp_path / name).write_bytes(raw)
    np.save(tmp_path / "array.npy", np.arange(3.0))
    for name in [*files, "array.npy"]:
        with pytest.raises(ModelFileError, match="not a zip") as info:
            bnpcore.load(tmp_path / name)
        assert repr(str(tmp_path / name)) in str(info.value) and "pickle" not in str(info.value)


def _npy_header(shape, descr="<f8"):
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape!r}, }}"
    text += " " * (-(10 + len(text) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode()


def test_forged_array_shapes_and_compressed_members_are_refused_before_reading(tmp_path, saved):
    """An array header declaring a shape larger than its member (256 MiB for a few bytes) is
    refused before numpy allocates it; so is a compressed member, whose size the file does not
    bound (model files are uncompressed)."""
    import tracemalloc

    forged = tmp_path / "forged.npz"
    with zipfile.ZipFile(saved) as src, zipfile.ZipFile(forged, "w") as dst:
        for name in src.namelist():
            raw = src.read(name)
            if name == "G/N.npy":  # the same bytes after a header that declares 2**25 values
                raw = _npy_header((2**25,)) + raw[len(_npy_header((4,))):]
            dst.writestr(name, raw)
    tracemalloc.start()
    try:
        with pytest.raises(ModelFileError, match=r"member 'G/N.npy' declares shape \(33554432,\)") as info:
            bnpcore.load(forged)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**24 and repr(str(forged)) in str(info.value)
    with np.load(saved) as npz:
        np.savez_compressed(tmp_path / "compressed.npz", **{k: npz[k] for k in npz.files})
    with pytest.raises(ModelFileError, match="is compressed"):
        bnpcore.load(tmp_path / "compressed.npz")


def _rewrite_meta(src, dst, fn):
    with np.load(src) as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = json.loads(arrays["__meta__"].tobytes())
    fn(meta)
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(dst, **arrays)


def test_version_mismatch(tmp_path, saved):
    dst = tmp_path / "v.npz"
    _rewrite_meta(saved, dst, lambda m: m.update(format_version=FORMAT_VERSION + 1))
    with pytest.raises(ModelFileError, match="version"):
        bnpcore.load(dst)
    _rewrite_meta(saved, dst, lambda m: m.update(format="something-else"))
    with pytest.raises(ModelFileError, match="not a bnpcore model"):
        bnpcore.load(dst)


def test_checksum_and_consistency_errors(tmp_path, saved):
    with np.load(saved) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["G/N"] = arrays["G/N"] + 1.0  # silently altered array
    np.savez(tmp_path / "c.npz", **arrays)
    with pytest.raises(ModelFileError, match="checksum"):
        bnpcore.load(tmp_path / "c.npz")
    dst = tmp_path / "e.npz"
    _rewrite_meta(saved, dst, lambda m: m.update(estimator="KMeans"))
    with pytest.raises(ModelFileError, match="estimator"):
        bnpcore.load(dst)
    with zipfile.ZipFile(saved) as z:
        assert "__meta__.npy" in z.namelist()


def _rewrite_arrays(src, dst, fn):
    """Copy a model file with its arrays changed by ``fn`` and its checksums updated."""
    with np.load(src) as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = json.loads(arrays.pop("__meta__").tobytes())
    fn(arrays)
    meta["crc32"] = {k: zlib.crc32(np.ascontiguousarray(v).tobytes()) for k, v in arrays.items()}
    np.savez(dst, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)


def test_inconsistent_contents_are_reported_with_the_file_name(tmp_path, saved):
    """The checks of the file's contents (summary shapes, summary width, random streams) name
    the file like every other ModelFileError."""
    cases = {
        "shapes.npz": (lambda a: a.update({"G/N": np.zeros(a["G/N"].size + 1)}), None, "inconsistent summary shapes"),
        "width.npz": (lambda a: a.update({"G/S": np.zeros((a["G/S"].shape[0], 3))}), None, "summary width 3"),
        "stream.npz": (None, lambda m: m["state"]["rng_order"].update(bit_generator="Mystery"), "unknown bit generator"),
    }
    for name, (arrays_fn, meta_fn, fragment) in cases.items():
        dst = tmp_path / name
        if arrays_fn is not None:
            _rewrite_arrays(saved, dst, arrays_fn)
        else:
            _rewrite_meta(saved, dst, meta_fn)
        with pytest.raises(ModelFileError, match=fragment) as info:
            bnpcore.load(dst)
        assert repr(str(dst)) in str(info.value), str(info.value)


def _uids_repeated(a):
    a["G/uids"] = np.zeros_like(a["G/uids"])


def _counts_as_text(a):
    a["G/N"] = a["G/N"].astype("U32")


def _history_cut(a):
    a["history/elbo"] = a["history/elbo"][:1]


@pytest.mark.parametrize(
    "meta_fn,arrays_fn,fragment",
    [
        (lambda m: m.update(fitted="no"), None, "'fitted' is 'no', not a boolean"),
        (lambda m: m.update(converged="no"), None, "'converged' is 'no', not a boolean"),
        (lambda m: m.update(n_iter=2.5), None, "'n_iter' is 2.5, not an integer"),
        (lambda m: m.update(n_rows="600"), None, "'n_rows' is '600', not an integer"),
        (lambda m: m.update(n_features_in=m["n_features_in"] + 2), None, "'n_features_in' is 5 but the observation model has 3"),
        (lambda m: m.update(feature_names_in=["a", "b"]), None, "'feature_names_in' is not a list of 3 strings"),
        (lambda m: m["state"].update(next_uid=4.5), None, "'next_uid' is 4.5, not an integer"),
        (lambda m: m["state"].update(batch_seed="seed"), None, "'batch_seed' is 'seed', not an integer or null"),
        (lambda m: m["state"]["extra_fields"].update(mixed_top_l="no"), None, "field 'mixed_top_l' is 'no', not a boolean"),
        (None, _uids_repeated, "repeated cluster uids"),
        (None, _counts_as_text, "'G/N' has dtype <U32"),
        (None, _history_cut, "history 'elbo' has 1 entries for 3 laps"),
    ],
)
def test_metadata_of_the_wrong_type_or_size_is_refused(tmp_path, saved, meta_fn, arrays_fn, fragment):
    """Values that json and numpy read without complaint but that no saved model holds (a string
    or a float where a flag or a count belongs, a width other than the observation model's,
    repeated uids, text summaries, a shorter trace) are refused rather than loaded into a model
    whose attributes are wrong (a string "no" was read as converged, 5 features as 5)."""
    dst = tmp_path / "bad.npz"
    if meta_fn is not None:
        _rewrite_meta(saved, dst, meta_fn)
    else:
        _rewrite_arrays(saved, dst, arrays_fn)
    with pytest.raises(ModelFileError, match=re.escape(fragment)) as info:
        bnpcore.load(dst)
    assert repr(str(dst)) in str(info.value)


_KILL_FAMILY_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, warnings
    import bnpcore

    family, ckpt, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.path.insert(0, sys.argv[4])  # the tests folder: _helpers
    if family == "topic":
        from bnpcore.data.documents import DocumentBatches as Batches
    else:
        from bnpcore.data.sequences import SequenceBatches as Batches
    calls = [0]
    orig = Batches.get
    def get(self, b):  # SIGKILL at the kill_at-th batch read (lap passes and move passes alike)
        calls[0] += 1
        if calls[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return orig(self, b)
    Batches.get = get
    warnings.simplefilter("error")
    warnings.simplefilter("ignore", bnpcore.exceptions.ConvergenceWarning)
    from _helpers import family_data, family_estimator
    X, kw = family_data(family)
    family_estimator(family, max_laps=8, checkpoint_path=ckpt).fit(X, **kw)
    """
)


@pytest.mark.parametrize("family,kill_at", [("topic", 40), ("topic", 48), ("hmm", 45), ("hmm", 77)])
def test_sigkill_of_a_topic_or_hmm_fit_with_default_moves_resumes_to_the_same_model(tmp_path, family, kill_at):
    # the families with their default moves (birth, merge, delete from one topic / state):
    # killed in the middle of lap 5, 6 or 8 (counting the batch reads of the laps and of the
    # moves' passes), when the moves carry failures that decide what is proposed next (three of
    # the four cases fail if the checkpoint loses them), the last checkpoint resumed to 8 laps
    # equals a run never interrupted — objective trace, moves and summaries
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = tmp_path / "run.py"
    script.write_text(_KILL_FAMILY_SCRIPT)
    ckpt = tmp_path / "ckpt.npz"
    proc = subprocess.run([sys.executable, str(script), family, str(ckpt), str(kill_at), tests_dir], capture_output=True,
                          timeout=300, check=False)
    assert proc.returncode == -9, proc.stderr.decode()
    resumed = bnpcore.load(ckpt)
    done = resumed.state_.lap
    assert done in (4, 5, 7)
    assert any(resumed.state_.moves_state.get(k) for k in ("delete_failed", "birth_failed", "failed"))
    X, kw = family_data(family)
    resumed.set_params(warm_start=True, max_laps=8 - done, checkpoint_path=None)
    fit_quietly(resumed, X, **kw)
    reference = fit_quietly(family_estimator(family, max_laps=8), X, **kw)
    assert any(r["accepted"] for r in reference.moves_log_)  # the moves did something
    _same_state(resumed, reference)
    np.testing.assert_array_equal(resumed.summaries_.S, reference.summaries_.S)
