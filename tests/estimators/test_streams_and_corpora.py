"""Re-iterable corpora get every lap; iterators stream once; progress bars for streams and
partial_fit (issue 14 items 3 and 4)."""

import warnings

import numpy as np
import pytest
from bnpcore import DPMixture
from bnpcore.exceptions import ConvergenceWarning


def _fit(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X)


class Corpus:
    """A gensim-style corpus: every ``iter`` starts a new pass over bag-of-words documents."""

    def __init__(self, X):
        self.X = X
        self.passes = 0

    def __iter__(self):
        self.passes += 1
        for row in self.X:
            nz = np.flatnonzero(row)
            yield [(int(v), float(row[v])) for v in nz]


class Batches:
    def __init__(self, parts):
        self.parts = parts
        self.passes = 0

    def __iter__(self):
        self.passes += 1
        return iter(self.parts)


def _counts(n=240, V=30, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(V, 0.2), size=3)
    return np.stack([rng.multinomial(20, p[i % 3]) for i in range(n)]).astype(float)


def test_reiterable_bag_of_words_corpus_gets_every_lap():
    X = _counts()
    corpus = Corpus(X)
    kw = dict(obs="mult", n_components=3, algorithm="memoized", n_batches=2, moves=(), max_laps=5, tol=0, random_state=0)
    m = _fit(DPMixture(**kw), corpus)
    assert m.n_iter_ >= 2 and corpus.passes >= m.n_iter_  # laps, not one streaming pass
    ref = _fit(DPMixture(**kw), X)
    assert np.isfinite(m.elbo_) and m.n_features_in_ == X.shape[1]
    assert abs(m.elbo_ - ref.elbo_) < 1e-6 * abs(ref.elbo_) or m.n_components_ == ref.n_components_


def test_reiterable_batches_equal_a_list_of_batches():
    X = _counts(seed=1)
    parts = [X[:100], X[100:170], X[170:]]
    kw = dict(obs="mult", n_components=3, algorithm="memoized", max_laps=6, tol=0, random_state=2)
    a = _fit(DPMixture(**kw), parts)
    src = Batches(parts)
    b = _fit(DPMixture(**kw), src)
    assert np.array_equal(a.history_["elbo"], b.history_["elbo"]) and src.passes > 1


def test_an_iterator_streams_once():
    X = _counts(seed=2)
    m = _fit(DPMixture(obs="mult", n_components=2, random_state=0), iter([X[:120], X[120:]]))
    assert m.n_iter_ == 1


def test_progress_bars_for_streams_and_partial_fit(capsys):
    pytest.importorskip("tqdm")
    X = _counts(seed=3)
    m = DPMixture(obs="mult", n_components=2, verbose=True, random_state=0)
    m.partial_fit(X[:100])
    err = capsys.readouterr().err
    assert "DPMixture" in err and "batch" in err
    _fit(DPMixture(obs="mult", n_components=2, verbose=True, random_state=0), iter([X[:120], X[120:]]))
    err = capsys.readouterr().err
    assert "2batch" in err.replace(" ", "") or "2/" in err
