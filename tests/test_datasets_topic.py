"""Text corpora shipped inside PyPI packages (skipped when the package is absent)."""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest
from bnpcore import ConvergenceWarning, HDPTopicModel, ParameterError
from bnpcore.datasets import load_lee_corpus, load_reuters, load_wiki_sample


@pytest.mark.skipif(importlib.util.find_spec("lda") is None, reason="the lda package is not installed")
def test_reuters_loads_and_fits():
    X, vocab = load_reuters()
    assert X.shape == (395, 4258) and len(vocab) == 4258
    assert X.data.sum() == 84010 and np.all(X.data == np.floor(X.data))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = HDPTopicModel(20, n_batches=2, max_laps=3, random_state=0, moves=()).fit(X[:300])
    assert np.isfinite(m.score(X[300:]))
    words = m.top_words(5, vocabulary=vocab)
    assert all(len(w) == 5 for w in words)


@pytest.mark.skipif(importlib.util.find_spec("gensim") is None, reason="gensim is not installed")
def test_lee_corpus_loads():
    X, vocab = load_lee_corpus()
    assert X.shape[0] == 300 and X.shape[1] == len(vocab)
    assert vocab == sorted(vocab) and "the" not in vocab
    assert X.sum(axis=0).min() >= 2
    X50, _ = load_lee_corpus(background=False)
    assert X50.shape[0] == 50


@pytest.mark.skipif(importlib.util.find_spec("gensim") is None, reason="gensim is not installed")
def test_wiki_sample_loads_and_fits():
    X, vocab = load_wiki_sample()
    assert X.shape == (250, len(vocab)) and vocab == sorted(vocab)
    assert X.sum(axis=0).min() >= 2 and np.all(X.data == np.floor(X.data))
    assert "anarch" in vocab  # the file's stemmed tokens are kept as they are
    X1, vocab1 = load_wiki_sample(min_count=1)
    assert len(vocab1) > len(vocab) and X1.data.sum() > X.data.sum()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = HDPTopicModel(10, max_laps=2, random_state=0, moves=()).fit(X[:200])
    assert np.isfinite(m.score(X[200:]))


def test_missing_package_raises_import_error(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("lda", "gensim") else real(name, *a))
    with pytest.raises(ImportError, match="pip install lda"):
        load_reuters()
    with pytest.raises(ImportError, match="pip install gensim"):
        load_lee_corpus()
    with pytest.raises(ImportError, match="pip install gensim"):
        load_wiki_sample()


@pytest.mark.parametrize("loader", [load_lee_corpus, load_wiki_sample])
@pytest.mark.parametrize("min_count", [-1, 1.5, "2", True, None])
def test_corpus_loaders_check_min_count_before_looking_for_gensim(loader, min_count):
    with pytest.raises(ParameterError, match="`min_count` must be"):
        loader(min_count=min_count)


def test_lee_corpus_checks_background():
    with pytest.raises(ParameterError, match="`background` must be a bool"):
        load_lee_corpus(background="no")
