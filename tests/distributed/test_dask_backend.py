"""backend="dask": the same fit as the local backend, data read by the workers, moves, faults,
bad cluster states (bnpcore.distributed)."""

import os
import re
import signal
import socket
import warnings

import bnpcore
import numpy as np
import pytest
from _helpers import seeded_data
from bnpcore import DPMixture, FiniteMixture
from bnpcore.exceptions import BackendError, ConvergenceWarning, ParameterError

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

OBS = ("gauss", "diag_gauss", "zero_mean_gauss", "mult", "bern")


def _fit(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X)


@pytest.fixture(scope="module")
def client():
    """An in-process cluster of 2 workers (fast to start; the fault tests use processes)."""
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
    ) as cluster, distributed.Client(cluster) as c:
        yield c


def _same_fit(a, b):
    assert np.array_equal(a.history_["elbo"], b.history_["elbo"])
    assert np.array_equal(a.history_["n_components"], b.history_["n_components"])
    for name in ("N", "S", "H"):
        assert np.array_equal(getattr(a.summaries_, name), getattr(b.summaries_, name))
    assert np.array_equal(a.summaries_.uids, b.summaries_.uids)
    assert a.moves_log_ == b.moves_log_


# ------------------------------------------------------------------- the parallel schedule
@pytest.mark.parametrize("obs", OBS)
@pytest.mark.parametrize("moves", [None, ()])
def test_parallel_schedule_is_monotone_lap_to_lap(obs, moves):
    X = seeded_data(obs, n=900, d=3, k=5, seed=4)
    m = _fit(DPMixture(obs, n_components=8, algorithm="memoized", n_batches=3, schedule="parallel", moves=moves,
                       max_laps=12, tol=0, random_state=2), X)
    elbo = m.history_["elbo"]
    assert np.all(np.diff(elbo[1:]) >= -1e-9 * np.abs(elbo[1:-1]))
    assert np.isfinite(m.elbo_)


def test_parallel_schedule_differs_from_sequential():
    """The schedule is an actual option: visiting batches against the lap's starting globals
    gives another trajectory than visiting them one after the other."""
    X = seeded_data("gauss", n=900, k=5, seed=1)
    kw = dict(n_components=6, algorithm="memoized", n_batches=3, moves=(), max_laps=4, tol=0, random_state=0)
    a = _fit(DPMixture(schedule="parallel", **kw), X)
    b = _fit(DPMixture(schedule="sequential", **kw), X)
    assert not np.array_equal(a.history_["elbo"], b.history_["elbo"])


def test_bad_schedule_and_backend():
    X = seeded_data("gauss", n=100)
    with pytest.raises(ParameterError, match="schedule"):
        DPMixture(schedule="random").fit(X)
    with pytest.raises(ParameterError, match="backend"):
        DPMixture(backend="spark").fit(X)
    with pytest.raises(ParameterError, match="client"):
        DPMixture(backend="dask", algorithm="memoized", client=42).fit(X)
    with pytest.raises(ParameterError, match="memoized"):
        DPMixture(backend="dask", algorithm="full").fit(X)
    with pytest.raises(ParameterError, match="memoized"):  # "auto" is "full" for FiniteMixture: refused before a cluster starts
        FiniteMixture(backend="dask", algorithm="auto").fit(X)


# ------------------------------------------------------------- Dask == local, in memory
@pytest.mark.parametrize("obs", OBS)
@pytest.mark.parametrize("moves", [None, ()])
@pytest.mark.parametrize("schedule", ["parallel", "sequential"])
def test_dask_equals_local(client, obs, moves, schedule):
    X = seeded_data(obs, n=900, d=3, k=5, seed=7)
    kw = dict(obs=obs, n_components=4, algorithm="memoized", n_batches=3, schedule=schedule, moves=moves,
              max_laps=6, tol=0, random_state=5)
    local = _fit(DPMixture(**kw), X)
    remote = _fit(DPMixture(backend="dask", client=client, **kw), X)
    _same_fit(local, remote)
    assert remote.predict(X).tolist() == local.predict(X).tolist()


def test_dask_equals_local_with_births_collected_on_workers(client):
    """From one cluster, births must collect rows on the workers: the accepted births and the
    whole trajectory are those of the local fit."""
    X = seeded_data("gauss", n=1200, d=2, k=6, seed=3)
    kw = dict(n_components=1, algorithm="memoized", n_batches=4, schedule="parallel", max_laps=10, tol=0, random_state=1)
    local = _fit(DPMixture(**kw), X)
    remote = _fit(DPMixture(backend="dask", client=client, **kw), X)
    assert any(r["kind"] == "birth" and r["accepted"] for r in local.moves_log_)
    _same_fit(local, remote)


def test_dask_equals_local_with_sparse_rows_and_default_moves(client):
    """L-sparse rows with the default moves on the workers: the co-occurring pairs that choose
    the merge candidates and the deletes that re-spread only their target's rows come back from
    the workers' local steps, and the whole trajectory is the local fit's."""
    from bnpcore.moves._base import decode_state

    X = seeded_data("gauss", n=1500, d=2, k=5, seed=11)
    kw = dict(n_components=14, algorithm="memoized", n_batches=3, top_l=2, dense_laps=0, max_laps=6, tol=0, random_state=2)
    local = _fit(DPMixture(**kw), X)
    remote = _fit(DPMixture(backend="dask", client=client, **kw), X)
    assert any(r["kind"] == "merge" and r["accepted"] for r in local.moves_log_)
    assert len(decode_state(local.moves_manager_.get_state()["moves"]["merge"]["co"])["pairs"]) > 0
    _same_fit(local, remote)
    assert remote.moves_log_ == local.moves_log_


@pytest.mark.parametrize("schedule", ["sequential", "parallel"])
def test_dask_equals_local_with_the_delete_screens_subsample(client, schedule):
    """Enough rows for the delete screen's fixed-stride subsample (``delete_min_sample``) and
    births collecting rows from K = 1: the subsample is taken where the batch lives, so the Dask
    fit screens with the same rows as the local one and follows the same trajectory. (It was
    read from the driver's copy of the batch, which on a cluster holds only the rows births
    collect: on 12,000 × 48 rows the Dask fit tried three deletes the local one screened out.)"""
    X = seeded_data("gauss", n=6000, d=4, k=8, seed=5)
    kw = dict(n_components=1, algorithm="memoized", n_batches=3, schedule=schedule, max_laps=6, tol=0, random_state=0)
    local = _fit(DPMixture(**kw), X)
    remote = _fit(DPMixture(backend="dask", client=client, **kw), X)
    assert any(r["kind"] == "birth" and r["accepted"] for r in local.moves_log_)
    delete = {m.kind: m for m in local.moves_manager_.moves}["delete"]
    assert sorted(delete.sample) == [0, 1, 2] and sum(len(x) for x in delete.sample.values()) >= 500
    remote_delete = {m.kind: m for m in remote.moves_manager_.moves}["delete"]
    for b in range(3):
        np.testing.assert_array_equal(remote_delete.sample[b], delete.sample[b])
    _same_fit(local, remote)


@pytest.mark.parametrize("obs", ["mult", "bern"])
def test_dask_equals_local_on_scipy_sparse_rows_with_births(client, obs):
    """scipy.sparse rows scattered to the workers: a birth's collected rows come back sparse
    (not an object array the move cannot read) and the fit equals the local one."""
    sp = pytest.importorskip("scipy.sparse")
    X = sp.csr_matrix(seeded_data(obs, n=900, d=12, k=5, seed=7))
    kw = dict(obs=obs, n_components=1, algorithm="memoized", n_batches=3, schedule="parallel", max_laps=5, tol=0, random_state=1)
    local = _fit(DPMixture(**kw), X)
    assert any(r["kind"] == "birth" for r in local.moves_log_)
    _same_fit(local, _fit(DPMixture(backend="dask", client=client, **kw), X))

def test_dask_stochastic_and_finite(client):
    X = seeded_data("diag_gauss", n=600, seed=2)
    for est in (
        dict(cls=DPMixture, algorithm="stochastic"),
        dict(cls=FiniteMixture, algorithm="memoized", schedule="parallel"),
    ):
        cls = est.pop("cls")
        kw = dict(obs="diag_gauss", n_components=4, n_batches=3, max_laps=4, tol=0, random_state=0, **est)
        _same_fit(_fit(cls(**kw), X), _fit(cls(backend="dask", client=client, **kw), X))


# ------------------------------------------------------ data the workers read themselves
def _npy_batches(tmp_path, X, sizes):
    paths, lo = [], 0
    for b, n in enumerate(sizes):
        p = tmp_path / f"batch{b}.npy"
        np.save(p, X[lo : lo + n])
        paths.append(str(p))
        lo += n
    return paths


def test_npy_paths_equal_local_list_of_paths(client, tmp_path):
    X = seeded_data("gauss", n=900, k=4, seed=11)
    paths = _npy_batches(tmp_path, X, [300, 250, 350])
    kw = dict(n_components=3, algorithm="memoized", schedule="parallel", max_laps=6, tol=0, random_state=3)
    _same_fit(_fit(DPMixture(**kw), paths), _fit(DPMixture(backend="dask", client=client, **kw), paths))


def test_dask_array_and_dataframe_chunks_are_the_batches(client):
    X = seeded_data("gauss", n=900, k=4, seed=12)
    chunks = [X[:400], X[400:700], X[700:]]
    kw = dict(n_components=3, algorithm="memoized", schedule="parallel", max_laps=5, tol=0, random_state=4)
    local = _fit(DPMixture(**kw), chunks)
    arr = da.concatenate([da.from_array(c, chunks=c.shape) for c in chunks])
    _same_fit(local, _fit(DPMixture(backend="dask", client=client, **kw), arr))
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    frame = dd.concat([dd.from_pandas(pd.DataFrame(c, columns=["a", "b", "c"]), npartitions=1) for c in chunks])
    _same_fit(local, _fit(DPMixture(backend="dask", client=client, **kw), frame))


def test_bad_data_on_workers_is_a_clear_error(client, tmp_path):
    X = seeded_data("gauss", n=300)
    paths = _npy_batches(tmp_path, X, [150, 150])
    with pytest.raises(BackendError, match="could not read batch 1"):
        DPMixture(algorithm="memoized", backend="dask", client=client).fit([paths[0], str(tmp_path / "missing.npy")])
    Y = X.copy()
    Y[200, 1] = np.nan
    bad = _npy_batches(tmp_path, Y, [150, 150])
    with pytest.raises(ValueError, match=r"batch 1"):
        DPMixture(algorithm="memoized", backend="dask", client=client).fit(bad)
    with pytest.raises(ParameterError, match="at least 2 batches"):
        DPMixture(algorithm="memoized", backend="dask", client=client).fit(paths[:1])
    with pytest.raises(ParameterError, match="read again"):
        DPMixture(algorithm="memoized", backend="dask", client=client).fit(iter([X]))


def test_delayed_objects_and_futures_as_data_are_a_clear_error(client):
    """A dask Delayed object or a distributed Future (alone or in a list of batches) is not
    data bnpcore can read: a DataError naming the argument, on either backend and for every
    method that takes data (not a TypeError or AttributeError from inside)."""
    import dask
    from bnpcore import HDPTopicModel
    from bnpcore.exceptions import DataError

    X = seeded_data("gauss", n=300)
    fitted = _fit(DPMixture(n_components=2, max_laps=2), X)
    docs = bnpcore.datasets.make_bars(n_docs=60, random_state=0)[0]
    topics = _fit(HDPTopicModel(n_components=2, max_laps=2), docs)
    lazy = (dask.delayed(np.asarray)(X), client.scatter(X, hash=False),
            [dask.delayed(np.asarray)(X[:150]), dask.delayed(np.asarray)(X[150:])])
    for data in lazy:
        for backend in ("local", "dask"):
            with pytest.raises(DataError, match=r"`X(\[0\])?` is a dask"):
                DPMixture(algorithm="memoized", n_batches=2, backend=backend, client=client).fit(data)
        for call in (DPMixture().partial_fit, fitted.predict, fitted.score, topics.transform, topics.score):
            with pytest.raises(DataError, match=r"`X(\[0\])?` is a dask"):
                call(data)

def test_save_load_and_resume_after_a_dask_fit(client, tmp_path):
    X = seeded_data("gauss", n=900, k=5, seed=9)
    kw = dict(n_components=2, algorithm="memoized", n_batches=3, schedule="parallel", tol=0, random_state=8)
    straight = _fit(DPMixture(max_laps=6, **kw), X)
    part = _fit(DPMixture(max_laps=3, backend="dask", client=client, checkpoint_path=str(tmp_path / "ck.npz"), **kw), X)
    loaded = bnpcore.load(tmp_path / "ck.npz")
    assert loaded.backend == "dask" and loaded.client is None
    assert np.array_equal(loaded.history_["elbo"], part.history_["elbo"])
    loaded.set_params(warm_start=True, max_laps=3, client=client)
    _same_fit(straight, _fit(loaded, X))


def test_clone_deepcopy_and_pickle_with_a_client(client):
    """An estimator holding a Client (a live connection that cannot be copied): clone and
    deepcopy share the client (so cross-validation and grid search work), pickling leaves it
    out (client=None, as in model files), and the copies fit to the same model."""
    import copy
    import pickle

    from sklearn.base import clone
    from sklearn.model_selection import cross_val_score

    X = seeded_data("gauss", n=600, seed=4)
    est = DPMixture(backend="dask", client=client, n_components=3, algorithm="memoized", n_batches=2, max_laps=3, tol=0,
                    random_state=0)
    assert clone(est).client is client
    assert copy.deepcopy(est).client is client
    fitted = _fit(est, X)
    assert est.client is client
    for other in (clone(fitted), copy.deepcopy(fitted)):
        assert other.client is client
        _same_fit(fitted, _fit(other, X))
    back = pickle.loads(pickle.dumps(fitted))
    assert back.client is None and back.backend == "dask"
    _same_fit(fitted, back)
    assert fitted.client is client
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert np.all(np.isfinite(cross_val_score(est, X, cv=2)))

# --------------------------------------------------------------------------- bad clusters
def test_cluster_without_workers_times_out(monkeypatch):
    monkeypatch.setattr("bnpcore.distributed.WORKER_TIMEOUT", 1.0)
    X = seeded_data("gauss", n=200)
    with (
        distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as c,
        pytest.raises(BackendError, match="no Dask worker"),
    ):
        DPMixture(algorithm="memoized", n_batches=2, backend="dask", client=c).fit(X)


def test_closed_client_and_cluster_closed_mid_fit_are_backend_errors(tmp_path):
    """A client closed before the fit, and a cluster closed under a running fit, raise
    BackendError saying so (not the client's ClosedClientError, nor a misleading "cannot import
    bnpcore"); the estimator keeps the laps it completed and can be saved."""
    X = seeded_data("gauss", n=600, seed=3)
    kw = dict(n_components=3, algorithm="memoized", n_batches=3, schedule="parallel", moves=(), max_laps=6, tol=0, random_state=0)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        c = distributed.Client(cluster)
        c.close()
        with pytest.raises(BackendError, match="`client` is closed"):
            DPMixture(backend="dask", client=c, **kw).fit(X)
    with (
        distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as c,
    ):

        def close_at_lap_2(model, info):
            if info["lap"] == 2:
                cluster.close()

        est = DPMixture(backend="dask", client=c, callback=close_at_lap_2, **kw)
        with pytest.raises(BackendError, match="cluster was lost during the fit"):
            est.fit(X)
    assert est.n_iter_ == 2 and not est.converged_
    est.save(tmp_path / "m.npz")
    assert bnpcore.load(tmp_path / "m.npz").n_iter_ == 2

def test_unreachable_scheduler_address_is_a_backend_error(monkeypatch):
    """A `client` address nothing listens on: BackendError naming the address, after the
    timeout, wrapping the connection error."""
    monkeypatch.setattr("bnpcore.distributed.WORKER_TIMEOUT", 1.0)
    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    X = seeded_data("gauss", n=200)
    with pytest.raises(BackendError, match=re.escape(repr(address))) as info:
        DPMixture(algorithm="memoized", n_batches=2, backend="dask", client=address).fit(X)
    assert isinstance(info.value.__cause__, OSError)


@pytest.mark.parametrize("address", ["not an address", "", "foo://host:8786"])
def test_malformed_scheduler_address_is_a_parameter_error(address):
    """A `client` string that is not a scheduler address (no port, unknown scheme) is refused
    as a ParameterError naming `client`, before any Client is built from it."""
    with pytest.raises(ParameterError, match=r"`client` .* is not a Dask scheduler address"):
        DPMixture(algorithm="memoized", n_batches=2, backend="dask", client=address).fit(seeded_data("gauss", n=200))

def test_worker_that_cannot_import_bnpcore(client, monkeypatch):
    def broken():
        raise ModuleNotFoundError("No module named 'bnpcore'")

    monkeypatch.setattr("bnpcore.distributed._probe", broken)
    with pytest.raises(BackendError, match="cannot import bnpcore"):
        DPMixture(algorithm="memoized", n_batches=2, backend="dask", client=client).fit(seeded_data("gauss", n=200))


# ------------------------------------------------------------------- worker processes, faults
@pytest.fixture(scope="module")
def process_client():
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.mark.parametrize("family", ["mixture", "topic"])
def test_sparse_batches_on_process_workers(process_client, family):
    """scipy.sparse batches unpickled on process workers: their int64 ``indices`` can arrive
    unaligned in the message's frames, which the kernels' borrowed slices refuse (a default
    ``DPMixture("mult")`` fit of 20,000 × 200 counts failed on its first lap with "indptr and
    indices must be contiguous"); the arrays are realigned (copied only then) and the fit equals
    the local one."""
    sp = pytest.importorskip("scipy.sparse")
    from bnpcore import HDPTopicModel

    rng = np.random.default_rng(0)
    X = sp.csr_matrix(rng.poisson(rng.gamma(0.3, 1.0, (8, 200))[rng.integers(0, 8, 20000)]).astype(float))
    make = (lambda **kw: DPMixture(obs="mult", n_batches=4, max_laps=3, tol=0, random_state=0, **kw)) if family == "mixture" else (
        lambda **kw: HDPTopicModel(n_components=5, n_batches=4, max_laps=2, tol=0, random_state=0, **kw))
    local = _fit(make(), X)
    remote = _fit(make(backend="dask", client=process_client), X)
    assert np.array_equal(local.history_["elbo"], remote.history_["elbo"]) and local.moves_log_ == remote.moves_log_


def test_embedded_local_cluster_is_started_and_closed():
    X = seeded_data("gauss", n=400, seed=5)
    kw = dict(n_components=3, algorithm="memoized", n_batches=2, schedule="parallel", max_laps=3, tol=0, random_state=0)
    _same_fit(_fit(DPMixture(**kw), X), _fit(DPMixture(backend="dask", **kw), X))


def test_workers_read_the_files_and_a_killed_worker_changes_nothing(process_client, tmp_path, monkeypatch):
    """The driver never reads the batches (np.load fails on the driver), and killing a worker
    process in the middle of the fit ends in the same model as the uninterrupted local fit."""
    X = seeded_data("gauss", n=1500, k=5, seed=21)
    paths = _npy_batches(tmp_path, X, [500, 500, 500])
    kw = dict(n_components=2, algorithm="memoized", schedule="parallel", max_laps=6, tol=0, random_state=6)
    local = _fit(DPMixture(**kw), paths)

    killed = []

    def kill_one(model, info):
        if info["lap"] == 2 and not killed:
            pids = process_client.run(os.getpid)
            pid = sorted(pids.values())[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    def no_driver_reads(*a, **k):
        raise AssertionError("the driver read a batch")

    monkeypatch.setattr(np, "load", no_driver_reads)
    process_client.wait_for_workers(2, timeout=60)
    remote = _fit(DPMixture(backend="dask", client=process_client, callback=kill_one, **kw), paths)
    monkeypatch.undo()
    assert killed
    _same_fit(local, remote)


def test_far_from_origin_data_are_centred_on_the_workers_too(client):
    X = 1e7 + 1e-3 * seeded_data("gauss", n=900, k=4, seed=13)
    kw = dict(n_components=3, algorithm="memoized", n_batches=3, schedule="parallel", max_laps=5, tol=0, random_state=2)
    local = _fit(DPMixture(**kw), X)
    assert local.obs_model_.shift is not None
    _same_fit(local, _fit(DPMixture(backend="dask", client=client, **kw), X))


def test_hmm_on_dask_equals_local(client):
    """A family other than the mixtures runs on Dask unchanged (its batches of whole sequences
    are scattered once)."""
    from bnpcore import HDPHMM

    X, lengths, _ = bnpcore.datasets.make_sticky_hmm(n_seqs=8, seq_len=300, random_state=0)
    kw = dict(n_components=10, kappa=50.0, algorithm="memoized", n_batches=4, schedule="parallel", max_laps=6, tol=0, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        local = HDPHMM(**kw).fit(X, lengths)
        remote = HDPHMM(backend="dask", client=client, **kw).fit(X, lengths)
    assert np.array_equal(local.history_["elbo"], remote.history_["elbo"])
    assert np.array_equal(local.transmat_, remote.transmat_)


def test_hmm_settled_lap_on_dask_equals_local(client):
    """The default moves and tolerance: after a settled lap the time steps of every untried
    state are selected on the workers at once (``SELECT_ROWS`` with several columns), and the
    births judged from them, so the whole trajectory is the local fit's."""
    from bnpcore import HDPHMM

    X, lengths, _ = bnpcore.datasets.make_sticky_hmm(n_seqs=8, seq_len=400, random_state=0)
    kw = dict(n_batches=4, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        local = HDPHMM(**kw).fit(X, lengths)
        remote = HDPHMM(backend="dask", client=client, **kw).fit(X, lengths)
    laps = [r["lap"] for r in local.moves_log_ if r["kind"] == "birth"]
    assert max(laps.count(lap) for lap in set(laps)) >= 2  # a lap that judged several births
    assert np.array_equal(local.history_["elbo"], remote.history_["elbo"])
    assert local.moves_log_ == remote.moves_log_ and local.n_iter_ == remote.n_iter_


def test_topic_model_on_dask_equals_local(client):
    from bnpcore import HDPTopicModel

    X = bnpcore.datasets.make_bars(n_docs=200, random_state=0)[0]
    kw = dict(n_components=1, algorithm="memoized", n_batches=3, schedule="parallel", max_laps=5, tol=0, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        local = HDPTopicModel(**kw).fit(X)
        remote = HDPTopicModel(backend="dask", client=client, **kw).fit(X)
    assert np.array_equal(local.history_["elbo"], remote.history_["elbo"])
    assert local.moves_log_ == remote.moves_log_
    assert np.array_equal(local.topics_, remote.topics_)



def test_converged_topic_model_on_dask_equals_local(client):
    """A default fit to convergence, whose settled lap proposes a settled delete (rejected
    here; its candidate restarts the topic's documents cold on the workers, ``cold_mask``) and
    deleting the documents' small allocations (accepted here: the candidate's passes run on the
    workers from the counts the lap kept there), ends the same on a cluster as on one machine."""
    from bnpcore import HDPTopicModel

    X = bnpcore.datasets.make_bars(n_docs=200, random_state=0)[0]
    kw = dict(n_components=10, algorithm="memoized", n_batches=3, schedule="parallel", random_state=1)
    local = HDPTopicModel(**kw).fit(X)
    remote = HDPTopicModel(backend="dask", client=client, **kw).fit(X)
    small = [r for r in local.moves_log_ if "small_allocations" in r]
    assert local.converged_ and small and small[0]["accepted"]
    assert any(r.get("settled") for r in local.moves_log_)
    assert np.max(local.history_["overrelax"]) > 1.0  # over-relaxed laps (the default) on the workers too
    assert np.array_equal(local.history_["overrelax"], remote.history_["overrelax"])
    assert np.array_equal(local.history_["elbo"], remote.history_["elbo"])
    assert local.moves_log_ == remote.moves_log_
    assert np.array_equal(local.topics_, remote.topics_)


def test_finite_hmm_swaps_on_dask_equal_local(client):
    """FiniteHMM's default swap (the target's time steps collected on the workers, the
    candidate's passes run there) ends the same on a cluster as on one machine."""
    from bnpcore import FiniteHMM

    X, lengths = bnpcore.datasets.make_sticky_hmm("gauss", random_state=1)[:2]
    kw = dict(n_components=8, n_batches=2, schedule="parallel", random_state=0)
    local = FiniteHMM(**kw).fit(X, lengths)
    remote = FiniteHMM(backend="dask", client=client, **kw).fit(X, lengths)
    assert any(r["kind"] == "swap" and r["accepted"] for r in local.moves_log_)
    assert np.array_equal(local.history_["elbo"], remote.history_["elbo"])
    assert local.moves_log_ == remote.moves_log_


def test_finite_mixture_swaps_on_dask_equal_local(client):
    """FiniteMixture's default swap (the target's rows collected on the workers, the candidate's
    pass run there) ends the same on a cluster as on one machine."""
    from bnpcore import FiniteMixture

    X = bnpcore.datasets.make_gaussian_mixture(n_samples=4000, random_state=0)[0]
    kw = dict(n_components=25, algorithm="memoized", n_batches=2, schedule="parallel", random_state=0)
    local = FiniteMixture(**kw).fit(X)
    remote = FiniteMixture(backend="dask", client=client, **kw).fit(X)
    assert any(r["kind"] == "swap" and r["accepted"] for r in local.moves_log_)
    assert np.array_equal(local.history_["elbo"], remote.history_["elbo"])
    assert local.moves_log_ == remote.moves_log_


def test_lda_swaps_on_dask_equal_local(client):
    """FiniteTopicModel's default swap (its target's histograms collected on the workers, its
    candidate's passes run there from the counts the lap kept) ends the same on a cluster."""
    from bnpcore import FiniteTopicModel

    X = bnpcore.datasets.make_bars(n_docs=300, n_tokens=100, random_state=0)[0]
    kw = dict(n_components=10, algorithm="memoized", n_batches=3, schedule="parallel", random_state=1)
    local = FiniteTopicModel(**kw).fit(X)
    remote = FiniteTopicModel(backend="dask", client=client, **kw).fit(X)
    assert any(r["kind"] == "swap" and r["accepted"] for r in local.moves_log_)
    assert np.array_equal(local.history_["elbo"], remote.history_["elbo"])
    assert local.moves_log_ == remote.moves_log_
    assert np.array_equal(local.topics_, remote.topics_)


def test_tune_malloc_only_under_a_nanny_setting(monkeypatch):
    """The worker-side allocator fix (docs/distributed.md, "Cost") calls mallopt once, only
    when the nanny's MALLOC_TRIM_THRESHOLD_ is set and it is not turned off."""
    import ctypes

    from bnpcore import distributed as bd

    calls = []

    class FakeLibc:
        def mallopt(self, param, value):
            calls.append((param, value))
            return 1

    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeLibc())
    for env, expect in (({"MALLOC_TRIM_THRESHOLD_": "65536"}, 2), ({}, 0),
                        ({"MALLOC_TRIM_THRESHOLD_": "65536", "BNPCORE_DASK_MALLOC_TUNE": "0"}, 0)):
        calls.clear()
        monkeypatch.setattr(bd, "_malloc_tuned", False)
        monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
        monkeypatch.delenv("BNPCORE_DASK_MALLOC_TUNE", raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        bd._tune_malloc()
        bd._tune_malloc()  # once per process
        assert len(calls) == expect
        if expect:
            assert dict(calls) == {bd._M_TRIM_THRESHOLD: 256 * 1024 * 1024, bd._M_MMAP_THRESHOLD: 32 * 1024 * 1024}


def test_hmm_moves_on_dask_never_fetch_batches(client, monkeypatch):
    """The HMM's merge/delete candidates (whole-dataset passes) run on the workers that hold
    the batches: the driver never gathers a batch, and the fit equals the local one."""
    from bnpcore import HDPHMM
    from bnpcore.distributed import DaskBatches

    X, lengths, _ = bnpcore.datasets.make_sticky_hmm(n_seqs=8, seq_len=300, random_state=0)
    kw = dict(n_components=12, kappa=50.0, moves=("merge", "delete"), n_batches=4, schedule="parallel", max_laps=8, tol=0,
              random_state=1, move_options={"merge_candidates": 0})  # every merge judged by passes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        local = HDPHMM(**kw).fit(X, lengths)

        def no_fetch(self, b):
            raise AssertionError(f"the driver fetched batch {b}")

        monkeypatch.setattr(DaskBatches, "get", no_fetch)
        remote = HDPHMM(backend="dask", client=client, **kw).fit(X, lengths)
    assert [r["kind"] for r in local.moves_log_ if r.get("evaluated", "passes") == "passes"]
    assert local.moves_log_ == remote.moves_log_
    assert np.array_equal(local.history_["elbo"], remote.history_["elbo"])


def test_topic_moves_on_dask_never_fetch_batches(client, monkeypatch):
    """The topic model's delete and birth candidates (whole-dataset document-step passes) run on
    the workers: the driver never gathers a batch, and the fit equals the local one."""
    from bnpcore import HDPTopicModel
    from bnpcore.distributed import DaskBatches

    X = bnpcore.datasets.make_bars(n_docs=200, random_state=0)[0]
    kw = dict(n_components=1, algorithm="memoized", n_batches=3, schedule="parallel", max_laps=6, tol=0, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        local = HDPTopicModel(**kw).fit(X)

        def no_fetch(self, b):
            raise AssertionError(f"the driver fetched batch {b}")

        monkeypatch.setattr(DaskBatches, "get", no_fetch)
        remote = HDPTopicModel(backend="dask", client=client, **kw).fit(X)
    assert any(r["kind"] == "birth" for r in local.moves_log_)
    assert local.moves_log_ == remote.moves_log_
    assert np.array_equal(local.history_["elbo"], remote.history_["elbo"])


def test_birth_rows_are_selected_where_the_batch_lives():
    """A topic or HMM birth asks for per-row outputs with a selection rule; the worker-side
    step returns only the rows it collects (and their outputs), and the move's own rule picks
    every one of them again."""
    from bnpcore import HDPHMM, HDPTopicModel
    from bnpcore.algorithms.executor import SELECT_ROWS
    from bnpcore.distributed import _local_step

    X = bnpcore.datasets.make_bars(n_docs=60, random_state=0)[0]
    tm = _fit(HDPTopicModel(n_components=3, moves=(), n_batches=1, max_laps=2, random_state=0), X)
    model = tm._make_model(tm.obs_model_)
    Xc = tm._make_source(X).get(0)
    full, _, n = _local_step(model, Xc, tm.summaries_, {"return_doc_topic": True}, None, 0, None)
    thr = float(np.median(full["doc_topic"][:, 1]))
    out, rows, n2 = _local_step(model, Xc, tm.summaries_, {"return_doc_topic": True, SELECT_ROWS: ("doc_topic", 1, thr)}, None, 0, None)
    keep = np.flatnonzero(full["doc_topic"][:, 1] > thr)
    assert 0 < keep.size < Xc.shape[0] and n == n2 == Xc.shape[0]
    np.testing.assert_array_equal(out["doc_topic"], full["doc_topic"][keep])
    assert (rows != Xc[keep]).nnz == 0
    np.testing.assert_array_equal(out["N"], full["N"])

    Xs, lengths, _ = bnpcore.datasets.make_sticky_hmm(n_seqs=4, seq_len=100, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        hm = HDPHMM(n_components=4, moves=(), max_laps=2, random_state=0).fit(Xs, lengths)
    model = hm._make_model(hm.obs_model_)
    batch = hm._make_source(Xs).get(0)
    full, _, _ = _local_step(model, batch, hm.summaries_, {"return_resp": True}, None, 0, None)
    out, rows, _ = _local_step(model, batch, hm.summaries_, {"return_resp": True, SELECT_ROWS: ("resp", 2, 0.5)}, None, 0, None)
    keep = np.flatnonzero(full["resp"][:, 2] > 0.5)
    assert 0 < keep.size < batch.X.shape[0]
    np.testing.assert_array_equal(out["resp"], full["resp"][keep])
    np.testing.assert_array_equal(rows, model.prepare(batch).X[keep])


# ------------------------------------------------------------------- memos on the workers
def _gather_recorder(monkeypatch):
    """Record every value the driver gathers from the workers, per call."""
    import bnpcore.distributed as dist

    calls = []
    real = dist._gather

    def recording(client, futures):
        out = real(client, futures)
        calls.append(out if isinstance(futures, (list, tuple)) else [out])
        return out

    monkeypatch.setattr(dist, "_gather", recording)
    return calls


@pytest.mark.parametrize("obs", ["gauss", "mult"])
def test_parallel_memos_stay_on_the_workers_and_only_the_root_travels(client, monkeypatch, obs):
    """With the parallel schedule the batch memos are futures on the workers during the fit:
    no local-step output brings its data statistics ``S`` back, each lap fetches one summary
    (G's root), and the fitted state holds the memos in this process again (one gather at the
    end). The fit equals the local one bit for bit."""
    from bnpcore.distributed import RemoteMemo
    from bnpcore.stats import SuffStats

    X = seeded_data(obs, n=900, k=4, seed=31)
    laps = 4
    kw = dict(obs=obs, n_components=4, algorithm="memoized", n_batches=3, schedule="parallel", moves=(), max_laps=laps,
              tol=0, random_state=5)
    local = _fit(DPMixture(**kw), X)
    seen = []

    def during(model, info):
        seen.append([type(m).__name__ for m in model.state_.memos])

    calls = _gather_recorder(monkeypatch)
    remote = _fit(DPMixture(backend="dask", client=client, callback=during, **kw), X)
    monkeypatch.undo()
    _same_fit(local, remote)
    assert all(names == ["RemoteMemo"] * 3 for names in seen)
    assert all(type(m) is SuffStats for m in remote.state_.memos)
    assert not any(isinstance(m, RemoteMemo) for m in remote.state_.memos)
    summaries_per_call, parts = [], []
    for c in calls:
        n = 0
        for v in c:
            if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], SuffStats):  # (G, driver parts) of a lap
                n += 1
                parts.extend(v[1])
            elif isinstance(v, SuffStats):
                n += 1
            elif isinstance(v, tuple) and v and isinstance(v[0], dict):
                parts.append(v)
        if n:
            summaries_per_call.append(n)
    assert len(parts) == 3 * laps
    assert all("S" not in p[0] for p in parts)  # a local step's driver part: no data statistics
    # one summary per lap (G, every memo replaced at once), then the memos once at the end
    assert summaries_per_call == [1] * laps + [3]
    for name in ("N", "S", "H"):
        for a, b in zip(local.state_.memos, remote.state_.memos):
            assert np.array_equal(getattr(a, name), getattr(b, name))


def test_sequential_schedule_keeps_memos_on_the_driver(client):
    """The sequential schedule needs G after every batch, so its memos come to the driver."""
    X = seeded_data("gauss", n=600, k=3, seed=2)
    seen = []
    kw = dict(n_components=3, algorithm="memoized", n_batches=3, schedule="sequential", moves=(), max_laps=2, tol=0,
              random_state=0)
    _fit(DPMixture(backend="dask", client=client, callback=lambda m, i: seen.append(type(m.state_.memos[0]).__name__), **kw), X)
    assert seen == ["SuffStats", "SuffStats"]


def test_moves_change_the_memos_on_the_workers(client):
    """Accepted moves (births, merges, deletes, and the lap-end removal/sorting) transform the
    memos where they live, and the result equals the local fit."""
    from bnpcore.distributed import RemoteMemo

    X = seeded_data("gauss", n=1600, k=6, seed=9)
    kw = dict(n_components=1, algorithm="memoized", n_batches=4, schedule="parallel", max_laps=10, tol=0, random_state=2)
    local = _fit(DPMixture(**kw), X)
    kinds = []

    def during(model, info):
        assert all(isinstance(m, RemoteMemo) for m in model.state_.memos)
        kinds.append(info["accepted_moves"])

    remote = _fit(DPMixture(backend="dask", client=client, callback=during, **kw), X)
    _same_fit(local, remote)
    assert sum(kinds) > 0 and any(r["accepted"] for r in remote.moves_log_)


@pytest.fixture()
def fresh_process_client():
    """Two worker processes of their own (no worker killed by an earlier test still being
    replaced while this one runs)."""
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster, distributed.Client(cluster) as c:
        c.wait_for_workers(2, timeout=60)
        yield c


def test_lost_worker_memos_are_recomputed_from_their_recipe(fresh_process_client, tmp_path):
    """A worker killed between laps loses the memos it held; saving the checkpoint right after
    needs them, and the scheduler recomputes them from their batch and the lap's globals: the
    checkpoint and the final model are those of the uninterrupted fit."""
    process_client = fresh_process_client
    X = seeded_data("gauss", n=1500, k=5, seed=23)
    paths = _npy_batches(tmp_path, X, [300, 300, 300, 300, 300])
    kw = dict(n_components=2, algorithm="memoized", schedule="parallel", max_laps=5, tol=0, random_state=4)
    local = _fit(DPMixture(**kw), paths)
    killed = []

    def kill_one(model, info):
        if info["lap"] == 2 and not killed:
            futures = [m.future for m in model.state_.memos]
            distributed.wait(futures)
            held = process_client.who_has(futures)
            holder = sorted(w for ws in held.values() for w in ws)[0]  # a worker that holds memos
            pid = process_client.run(os.getpid)[holder]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    ckpt = tmp_path / "ckpt.npz"
    remote = _fit(DPMixture(backend="dask", client=process_client, callback=kill_one, checkpoint_path=ckpt, **kw), paths)
    assert killed
    _same_fit(local, remote)
    resumed = bnpcore.load(ckpt)
    assert np.array_equal(resumed.state_.memos[0].S, local.state_.memos[0].S)


def test_topic_parallel_schedule_keeps_the_guarded_update_monotone(client):
    """Topic models keep a batch's new summaries only if the objective does not drop; with the
    parallel schedule the block of replacements is kept when it raises the objective and is
    otherwise redone batch by batch. Every lap's objective is at least the previous one's, on
    both backends alike."""
    from bnpcore import HDPTopicModel

    X = bnpcore.datasets.make_bars(n_docs=300, random_state=3)[0]
    kw = dict(n_components=12, algorithm="memoized", n_batches=3, schedule="parallel", moves=("merge", "delete"),
              max_laps=8, tol=0, random_state=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        local = HDPTopicModel(**kw).fit(X)
        remote = HDPTopicModel(backend="dask", client=client, **kw).fit(X)
    e = np.asarray(local.history_["elbo"])
    assert np.all(np.diff(e[1:]) >= -1e-9 * np.abs(e[2:]))
    assert np.array_equal(e, remote.history_["elbo"])
    assert local.moves_log_ == remote.moves_log_


def test_worker_lost_with_scattered_batches_is_a_backend_error_saying_why(fresh_process_client, monkeypatch):
    """Batches scattered from an in-memory array have no recipe: a worker that held some is
    killed between laps, and the fit ends with a BackendError that says so and names the
    inputs that survive worker loss (not distributed's FutureCancelledError); the estimator
    keeps its completed laps."""
    monkeypatch.setattr("bnpcore.distributed.LOST_ATTEMPTS", 1)
    c = fresh_process_client
    X = seeded_data("gauss", n=900, k=4, seed=5)
    killed = []

    def kill_a_holder(model, info):
        if info["lap"] == 2 and not killed:
            # every worker holding a copy of one scattered batch (a task may have fetched a
            # copy to the other worker, so killing one holder would not lose it)
            key = min((k for k in c.who_has() if str(k).startswith("ndarray-")), key=str)
            pids = c.run(os.getpid)
            for holder in sorted(c.who_has()[key]):
                os.kill(pids[holder], signal.SIGKILL)
                killed.append(pids[holder])

    est = DPMixture(backend="dask", client=c, callback=kill_a_holder, n_components=3, algorithm="memoized", n_batches=3,
                    schedule="parallel", moves=(), max_laps=5, tol=0, random_state=0)
    with pytest.raises(BackendError, match="scattered from in-memory data"):
        est.fit(X)
    assert killed and est.n_iter_ == 2 and not est.converged_


def test_huge_rows_in_a_dask_chunk_are_refused_naming_the_batch(client):
    """Rows whose squares overflow, in a chunk the driver never reads (the initialisation
    sample is the first chunk's), are refused on the worker by the observation model's check,
    naming the batch, as a local fit refuses them; not a failure inside the local step."""
    from bnpcore.exceptions import DataError

    X = seeded_data("gauss", n=600, d=3, k=3, seed=2)
    bad = X.copy()
    bad[450] = 1e200
    arr = da.from_array(bad, chunks=(200, 3))
    with pytest.raises(DataError, match=r"`X \(batch 2\)` is too large in magnitude"):
        _fit(DPMixture(n_components=3, algorithm="memoized", backend="dask", client=client, init_subsample=200,
                       max_laps=2, random_state=0), arr)
