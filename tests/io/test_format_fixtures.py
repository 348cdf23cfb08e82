"""Model files written by an earlier bnpcore still load and predict the same.

``tests/io/data/*_v1.npz`` were written by ``tests/io/make_fixture.py`` with the bnpcore of the
commit that added them (format version 1, before persistence went through the registry), next to
``*_v1_expected.npz``: the data they were fitted to and what that bnpcore predicted. Keep them
when the format changes: a new reader must load them or refuse them with a clear version error,
never misread them.
"""

import json
import pathlib
import shutil
import warnings
import zipfile

import bnpcore
import numpy as np
import pytest
from bnpcore import DPMixture, FiniteMixture
from bnpcore.exceptions import ConvergenceWarning, ModelFileError
from bnpcore.io import FORMAT_VERSION
from scipy.special import gammaln

DATA = pathlib.Path(__file__).with_name("data")
FIXTURES = [
    ("dpmixture_gauss_memoized_v1", DPMixture, 1),
    ("finitemixture_mult_full_v1", FiniteMixture, 1),
    ("dpmixture_gauss_memoized_v2", DPMixture, 2),
    ("finitemixture_mult_full_v2", FiniteMixture, 2),
]


def _load_or_refuse(path, version):
    """The loaded model, or None if this bnpcore refuses the file's (older) format version with
    the clear version error. Files of the current version must load."""
    try:
        return bnpcore.load(path)
    except ModelFileError as exc:
        if version == FORMAT_VERSION:
            raise
        assert f"format version {version!r}; this bnpcore reads version {FORMAT_VERSION}" in str(exc)
        return None


@pytest.mark.parametrize("stem,cls,version", FIXTURES, ids=[f[0] for f in FIXTURES])
def test_saved_file_loads_and_predicts_the_same(stem, cls, version):
    path = DATA / f"{stem}.npz"
    expected = np.load(DATA / f"{stem}_expected.npz")
    assert path.stat().st_size < 50_000
    est = _load_or_refuse(path, version)
    if est is None:
        return
    assert type(est) is cls
    X = expected["X"]
    assert np.array_equal(est.predict(X), expected["predict"])
    np.testing.assert_allclose(est.predict_proba(X), expected["predict_proba"], rtol=1e-12, atol=1e-15)
    want = expected["score_samples"]
    if est.obs == "mult":
        # the files' bnpcore left the multinomial coefficient out of score_samples; it is in now
        want = want + gammaln(X.sum(axis=1) + 1) - gammaln(X + 1).sum(axis=1)
    np.testing.assert_allclose(est.score_samples(X), want, rtol=1e-12)
    np.testing.assert_allclose(est.weights_, expected["weights"], rtol=1e-12)
    assert est.elbo_ == pytest.approx(float(expected["elbo"]), rel=1e-12)
    assert est.n_components_ == int(expected["n_components"])
    assert est.state_.lap == int(expected["lap"])


@pytest.mark.parametrize("stem,cls,version", FIXTURES, ids=[f[0] for f in FIXTURES])
def test_saved_file_continues_fitting(stem, cls, version):
    est = _load_or_refuse(DATA / f"{stem}.npz", version)
    if est is None:
        return
    X = np.load(DATA / f"{stem}_expected.npz")["X"]
    lap = est.state_.lap
    est.set_params(warm_start=True, max_laps=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X)
    assert est.state_.lap == lap + est.n_iter_ and est.n_iter_ >= 1
    assert np.all(np.diff(est.history_["elbo"][lap - 1 :]) >= -1e-9 * abs(est.elbo_))


def _rewrite_meta(src, dst, edit):
    """Copy the model file ``src`` to ``dst`` with its JSON metadata changed by ``edit``."""
    with np.load(src, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = json.loads(arrays["__meta__"].tobytes())
    edit(meta)
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(dst, **arrays)


def test_other_format_version_is_refused_clearly(tmp_path):
    src = DATA / "dpmixture_gauss_memoized_v1.npz"
    for version in (0, FORMAT_VERSION + 1, "1", None):
        dst = tmp_path / f"v{version}.npz"
        _rewrite_meta(src, dst, lambda m, v=version: m.__setitem__("format_version", v))
        with pytest.raises(ModelFileError, match=f"format version {version!r}; this bnpcore reads version {FORMAT_VERSION}"):
            bnpcore.load(dst)


def test_fixture_is_a_plain_npz(tmp_path):
    """No pickled member: every member is a plain .npy array (the file outlives Python objects)."""
    dst = tmp_path / "copy.npz"
    shutil.copy(DATA / "dpmixture_gauss_memoized_v1.npz", dst)
    with zipfile.ZipFile(dst) as zf:
        assert all(name.endswith(".npy") for name in zf.namelist())
    with np.load(dst, allow_pickle=False) as npz:
        assert all(npz[k].dtype != object for k in npz.files)
