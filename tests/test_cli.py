"""The command line (issue 14, part 6): ``bnpcore fit | topics | hmm | info | predict``.

Most tests call :func:`bnpcore.cli.main` in-process (fast); a few run ``python -m bnpcore`` in
a subprocess to check the module entry point, exit statuses and that no traceback is printed.
"""

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import warnings

import bnpcore
import numpy as np
import pytest
from bnpcore.cli import main
from bnpcore.exceptions import ConvergenceWarning


@pytest.fixture
def data_file(tmp_path):
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(-5, 1, (60, 2)), rng.normal(5, 1, (60, 2))])
    path = tmp_path / "blobs.npy"
    np.save(path, X)
    return path, X


def run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, out, err, want_code, *fragments):
    assert code == want_code, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("bnpcore") and "error: " in lines[0]
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_fit_info_predict_round_trip(data_file, tmp_path, capsys):
    path, X = data_file
    out_model = tmp_path / "m.npz"
    code, out, err = run(["fit", path, "--out", out_model], capsys)
    assert code == 0, err
    model = bnpcore.load(out_model)
    assert isinstance(model, bnpcore.DPMixture) and model.n_components_ == 2
    # the summary: clusters found, ELBO, laps, time, where saved
    assert "clusters:  2 with expected count >= 1" in out
    assert f"ELBO:      {model.elbo_:.6g}" in out
    assert f"laps:      {model.n_iter_}, converged" in out
    assert "time:" in out and f"saved:     {out_model}" in out
    assert "lap" in err  # the progress bar (stderr)

    code, out, err = run(["info", out_model], capsys)
    assert code == 0 and err == ""
    assert "DPMixture" in out and "clusters:  2 with expected count >= 1" in out and "features:  2" in out

    labels_path = tmp_path / "labels.npy"
    code, out, _ = run(["predict", out_model, path, "--out", labels_path], capsys)
    assert code == 0
    np.testing.assert_array_equal(np.load(labels_path), model.predict(X))
    assert f"saved to {labels_path}" in out
    code, _, _ = run(["predict", out_model, path, "--proba", "--out", tmp_path / "p.npy"], capsys)
    assert code == 0
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), model.predict_proba(X))


def test_fit_with_defaults_only(data_file, capsys):
    """`bnpcore fit DATA.npy` alone: DP mixture, Gaussian, memoized with moves, seed 0, saved
    next to the data as DATA.model.npz; predict's default output is DATA.labels.npy."""
    path, X = data_file
    code, _, err = run(["fit", path], capsys)
    assert code == 0, err
    saved = path.with_name("blobs.model.npz")
    model = bnpcore.load(saved)
    params = model.get_params()
    assert (params["obs"], params["algorithm"], params["random_state"], params["moves"]) == ("gauss", "auto", 0, None)
    assert params["n_batches"] is None and params["n_components"] is None and params["verbose"] is False
    assert model._algorithm() == "memoized" and model.history_["n_components"][0] == 1
    code, _, _ = run(["predict", saved, path], capsys)
    assert code == 0
    np.testing.assert_array_equal(np.load(path.with_name("blobs.labels.npy")), model.predict(X))
    # the same command again gives the same model (fixed default seed)
    run(["fit", path, "--out", path.with_name("again.npz"), "--quiet"], capsys)
    assert bnpcore.load(path.with_name("again.npz")).elbo_ == model.elbo_


def test_options_reach_the_estimator(data_file, tmp_path, capsys):
    path, _ = data_file
    out_model = tmp_path / "f.npz"
    argv = ["fit", path, "--model", "finite", "--obs", "diag_gauss", "--n-components", "3", "--gamma", "2.5",
            "--algorithm", "full", "--max-laps", "7", "--tol", "1e-3", "--top-l", "2", "--random-state", "5",
            "--threads", "1", "--quiet", "--out", out_model]  # fmt: skip
    code, out, err = run(argv, capsys)
    assert code == 0 and out == "" and err == ""  # --quiet: no bar, no summary
    model = bnpcore.load(out_model)
    assert isinstance(model, bnpcore.FiniteMixture)
    p = model.get_params()
    want = dict(obs="diag_gauss", n_components=3, gamma=2.5, algorithm="full", max_laps=7, tol=1e-3, top_l=2, random_state=5, n_threads=1)
    assert {k: p[k] for k in want} == want
    assert model.n_iter_ <= 7
    code, _, _ = run(["fit", path, "--moves", "merge,delete", "--n-batches", "3", "--random-state", "none", "--quiet", "--out", tmp_path / "g.npz"], capsys)
    assert code == 0
    p = bnpcore.load(tmp_path / "g.npz").get_params()
    assert p["moves"] == ("merge", "delete") and p["n_batches"] == 3 and p["random_state"] is None


def test_text_files(data_file, tmp_path, capsys):
    _, X = data_file
    np.savetxt(tmp_path / "with_header.csv", X, delimiter=",", header="x,y", comments="")
    np.savetxt(tmp_path / "plain.txt", X)
    for name in ("with_header.csv", "plain.txt"):
        code, _, err = run(["fit", tmp_path / name, "--quiet", "--algorithm", "full"], capsys)
        assert code == 0, err
        model = bnpcore.load(tmp_path / (name.split(".")[0] + ".model.npz"))
        assert model.n_features_in_ == 2 and model._n_rows == 120
    (tmp_path / "words.csv").write_text("a,b\nc,d\n")
    assert_one_line_error(*run(["fit", tmp_path / "words.csv"], capsys), 1, "not a numeric table")


@pytest.mark.parametrize(
    "argv,fragment",
    [
        ([], "required: COMMAND"),
        (["frob"], "invalid choice: 'frob'"),
        (["fit"], "required: DATA"),
        (["fit", "{data}", "--model", "hdp"], "--model: invalid choice"),
        (["fit", "{data}", "--obs", "poisson"], "--obs: invalid choice"),
        (["fit", "{data}", "--n-components", "0"], "--n-components: expected a positive integer"),
        (["fit", "{data}", "--max-laps", "many"], "--max-laps: expected a positive integer"),
        (["fit", "{data}", "--gamma", "-1"], "--gamma: expected a positive number"),
        (["fit", "{data}", "--gamma", "nan"], "--gamma: expected a positive number"),
        (["fit", "{data}", "--tol", "-1"], "--tol: expected a non-negative number"),
        (["fit", "{data}", "--random-state", "-3"], "--random-state: expected a non-negative integer"),
        (["fit", "{data}", "--moves", "birth,split"], "--moves"),
        (["fit", "{data}", "--model", "finite", "--moves", "merge"], "--moves needs --model dp"),
        (["fit", "{data}", "--bogus"], "unrecognized arguments: --bogus"),
        (["predict", "{data}"], "required"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv, fragment, data_file, capsys):
    path, _ = data_file
    argv = [str(path) if a == "{data}" else a for a in argv]
    assert_one_line_error(*run(argv, capsys), 2, fragment)


def test_help_and_version(capsys):
    code, out, _ = run(["--help"], capsys)
    assert code == 0 and "fit" in out and "predict" in out
    code, out, _ = run(["fit", "--help"], capsys)
    assert code == 0 and "--n-components" in out and "(default: auto)" in out
    code, out, _ = run(["--version"], capsys)
    assert code == 0 and bnpcore.__version__ in out


@pytest.mark.parametrize("command", ["fit", "predict"])
def test_help_states_each_default_once_and_truly(command, capsys):
    code, out, _ = run([command, "--help"], capsys)
    assert code == 0
    text = " ".join(out.split())  # argparse wraps lines
    assert "(default: None)" not in text and "(default: False)" not in text
    assert not re.search(r"\(default: [^)]*\) \(default:", text)  # a default the help describes is not appended again
    if command == "fit":
        assert "'merge,delete' (default: auto)" in text  # --moves, whose default is 'auto'
        assert "for a fresh one (default: 0)" in text  # --random-state 0 is a default to show
        assert "(default: dense)" in text and "(default: all cores)" in text


def test_file_and_data_errors_exit_1_with_one_line(data_file, tmp_path, capsys):
    path, X = data_file
    model_path = tmp_path / "m.npz"
    assert run(["fit", path, "--quiet", "--out", model_path], capsys)[0] == 0
    assert_one_line_error(*run(["fit", tmp_path / "missing.npy"], capsys), 1, "no such data file")
    assert_one_line_error(*run(["fit", tmp_path], capsys), 1, "is a directory")
    assert_one_line_error(*run(["info", tmp_path / "missing.npz"], capsys), 1, "no such model file")
    assert_one_line_error(*run(["predict", tmp_path / "missing.npz", path], capsys), 1, "no such model file")
    assert_one_line_error(*run(["predict", model_path, tmp_path / "missing.npy"], capsys), 1, "no such data file")
    # corrupt model files: truncated, and a data file passed as a model
    (tmp_path / "cut.npz").write_bytes(model_path.read_bytes()[:500])
    assert_one_line_error(*run(["info", tmp_path / "cut.npz"], capsys), 1, "cut.npz")
    assert_one_line_error(*run(["info", path], capsys), 1, "not a readable bnpcore model file")
    # corrupt / unsuitable data files
    (tmp_path / "junk.npy").write_bytes(b"not an npy file at all")
    assert_one_line_error(*run(["fit", tmp_path / "junk.npy"], capsys), 1, "not a readable .npy file")
    np.save(tmp_path / "vector.npy", np.zeros(5))
    assert_one_line_error(*run(["fit", tmp_path / "vector.npy"], capsys), 1, "shape (5,)")
    assert_one_line_error(*run(["predict", model_path, tmp_path / "vector.npy"], capsys), 1, "shape (5,)")
    assert_one_line_error(*run(["fit", model_path], capsys), 1, ".npz archives are not data files")
    bad = X.copy()
    bad[3, 1] = np.nan
    np.save(tmp_path / "nan.npy", bad)
    assert_one_line_error(*run(["fit", tmp_path / "nan.npy", "--quiet"], capsys), 1, "NaN")
    np.save(tmp_path / "three.npy", np.ones((4, 3)))
    assert_one_line_error(*run(["predict", model_path, tmp_path / "three.npy"], capsys), 1, "3 features", "expecting 2")
    assert_one_line_error(*run(["fit", path, "--obs", "mult", "--quiet"], capsys), 1, "non-negative")


def test_warnings_become_one_line_each(data_file, tmp_path, capsys):
    path, _ = data_file
    code, out, err = run(["fit", path, "--max-laps", "1", "--out", tmp_path / "m.npz"], capsys)
    assert code == 0
    assert "bnpcore: warning: DPMixture did not converge in 1 laps" in err
    assert "not converged (max laps reached)" in out


def test_interrupt_exits_130(data_file, capsys, monkeypatch):
    path, _ = data_file

    def interrupted(self, X, y=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(bnpcore.DPMixture, "fit", interrupted)
    code, _, err = run(["fit", path, "--quiet"], capsys)
    assert code == 130 and err.strip() == "bnpcore: interrupted"


def test_tol_zero_is_accepted(data_file, tmp_path, capsys):
    """The estimators accept tol=0 (stop only on an unchanged ELBO): so does --tol."""
    path, X = data_file
    code, _, err = run(["fit", path, "--tol", "0", "--max-laps", "6", "--quiet", "--out", tmp_path / "m.npz"], capsys)
    assert code == 0, err
    model = bnpcore.load(tmp_path / "m.npz")
    assert model.get_params()["tol"] == 0
    again = bnpcore.DPMixture(tol=0, max_laps=6, random_state=0).fit(X)
    assert model.n_iter_ == again.n_iter_ and model.elbo_ == again.elbo_


def test_out_directory_is_checked_before_fitting(data_file, tmp_path, capsys, monkeypatch):
    path, _ = data_file
    fits = []
    monkeypatch.setattr(bnpcore.DPMixture, "fit", lambda self, X, y=None: fits.append(X))
    missing = tmp_path / "nowhere" / "m.npz"
    assert_one_line_error(*run(["fit", path, "--out", missing], capsys), 1, "--out", repr(str(missing.parent)), "does not exist")
    assert_one_line_error(*run(["fit", path, "--out", tmp_path], capsys), 1, "is a directory")
    assert fits == []  # refused before any work
    assert not (tmp_path / "nowhere").exists() and not list(tmp_path.glob(".*tmp*"))


def test_predict_out_directory_is_checked(data_file, tmp_path, capsys):
    path, _ = data_file
    assert run(["fit", path, "--quiet", "--out", tmp_path / "m.npz"], capsys)[0] == 0
    missing = tmp_path / "nowhere" / "labels.npy"
    assert_one_line_error(*run(["predict", tmp_path / "m.npz", path, "--out", missing], capsys), 1, "does not exist")


def test_text_files_without_rows_give_one_line(data_file, tmp_path, capsys):
    """An empty text file, or one holding a header line only, is one error line: numpy's warning
    about a file without data is not printed as well."""
    path, _ = data_file
    assert run(["fit", path, "--quiet", "--out", tmp_path / "m.npz"], capsys)[0] == 0
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "header.csv").write_text("x,y\n")
    for name in ("empty.txt", "header.csv"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a warning escaping the CLI fails the test
            assert_one_line_error(*run(["fit", tmp_path / name], capsys), 1, repr(str(tmp_path / name)), "no data rows")
            assert_one_line_error(*run(["predict", tmp_path / "m.npz", tmp_path / name], capsys), 1, "no data rows")


def test_unexpected_errors_are_one_line(data_file, capsys, monkeypatch):
    """A failure that is not a bnpcore error (a bug) still gives one line and exit status 1."""
    path, _ = data_file

    def broken(self, X, y=None):
        raise TypeError("something broke")

    monkeypatch.setattr(bnpcore.DPMixture, "fit", broken)
    assert_one_line_error(*run(["fit", path, "--quiet"], capsys), 1, "unexpected TypeError: something broke")


# ---------------------------------------------------------- topic models and HMMs (saved from Python)


@pytest.fixture(scope="module")
def other_families(tmp_path_factory):
    """Fitted and unfitted models of the other families, saved from Python, and their data."""
    d = tmp_path_factory.mktemp("families")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        counts = bnpcore.datasets.make_bars(n_docs=150, random_state=0)[0]
        np.save(d / "counts.npy", counts.toarray())
        bnpcore.HDPTopicModel(n_components=2, max_laps=3, random_state=0).fit(counts).save(d / "hdp_topics.npz")
        bnpcore.FiniteTopicModel(n_components=3, max_laps=3, random_state=0).fit(counts).save(d / "lda.npz")
        bnpcore.HDPTopicModel().save(d / "unfitted_topics.npz")
        S, lengths, _ = bnpcore.datasets.make_sticky_hmm(n_seqs=4, seq_len=80, random_state=0)
        np.save(d / "S.npy", S)
        np.save(d / "lengths.npy", lengths)
        np.savetxt(d / "lengths.txt", lengths, fmt="%d")
        bnpcore.HDPHMM(n_components=2, max_laps=3, random_state=0).fit(S, lengths).save(d / "hdphmm.npz")
        bnpcore.FiniteHMM(n_components=3, max_laps=3, random_state=0).fit(S, lengths).save(d / "fhmm.npz")
    return d, S, lengths


@pytest.mark.parametrize(
    "name,what",
    [("hdp_topics", "topics"), ("lda", "topics"), ("hdphmm", "states"), ("fhmm", "states")],
)
def test_info_on_every_family(other_families, name, what, capsys):
    d, _, _ = other_families
    model = bnpcore.load(d / f"{name}.npz")
    code, out, err = run(["info", d / f"{name}.npz"], capsys)
    assert code == 0 and err == "", err
    status = "converged" if model.converged_ else "not converged"
    assert type(model).__name__ in out and f"n_components={model.get_params()['n_components']!r}" in out
    assert f"{what + ':':<10} {model.n_components_} with expected count >= 1 ({model.counts_.size} represented)" in out
    assert f"ELBO:      {model.elbo_:.6g}" in out
    assert f"laps:      {len(model.history_['lap'])} in total, {status}" in out
    assert f"largest {what} (index: weight," in out
    code, out, err = run(["info", d / "unfitted_topics.npz"], capsys)
    assert code == 0 and err == "" and "HDPTopicModel" in out and "not fitted" in out


@pytest.mark.parametrize("name", ["hdp_topics", "lda"])
def test_predict_refuses_topic_models(other_families, name, tmp_path, capsys):
    d, _, _ = other_families
    for extra in ([], ["--proba"]):
        argv = ["predict", d / f"{name}.npz", d / "counts.npy", "--out", tmp_path / "out.npy", *extra]
        assert_one_line_error(*run(argv, capsys), 1, "has no labels to predict", "transform")
    assert not (tmp_path / "out.npy").exists()


def test_predict_hmm_with_and_without_lengths(other_families, tmp_path, capsys):
    d, S, lengths = other_families
    for name in ("hdphmm", "fhmm"):
        model = bnpcore.load(d / f"{name}.npz")
        for lengths_file in ("lengths.npy", "lengths.txt"):
            code, out, err = run(["predict", d / f"{name}.npz", d / "S.npy", "--lengths", d / lengths_file, "--out", tmp_path / "z.npy"], capsys)
            assert code == 0, err
            np.testing.assert_array_equal(np.load(tmp_path / "z.npy"), model.predict(S, lengths))
            assert f"in {len(lengths)} sequences" in out
        code, _, err = run(["predict", d / f"{name}.npz", d / "S.npy", "--lengths", d / "lengths.npy", "--proba", "--out", tmp_path / "p.npy"], capsys)
        assert code == 0, err
        np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), model.predict_proba(S, lengths))
        # without --lengths the file is one sequence, as documented (and said in the summary)
        code, out, err = run(["predict", d / f"{name}.npz", d / "S.npy", "--out", tmp_path / "one.npy"], capsys)
        assert code == 0, err
        np.testing.assert_array_equal(np.load(tmp_path / "one.npy"), model.predict(S))
        assert "in 1 sequence" in out
    np.save(tmp_path / "short.npy", lengths[:-1])
    assert_one_line_error(*run(["predict", d / "hdphmm.npz", d / "S.npy", "--lengths", tmp_path / "short.npy"], capsys), 1, "lengths", "sums to")
    assert_one_line_error(*run(["predict", d / "hdphmm.npz", d / "S.npy", "--lengths", tmp_path / "none.npy"], capsys), 1, "no such lengths file")
    with open(tmp_path / "archive.npy", "wb") as f:  # an .npz archive under a .npy name
        np.savez(f, lengths=lengths)
    code, out, err = run(["predict", d / "hdphmm.npz", d / "S.npy", "--lengths", tmp_path / "archive.npy"], capsys)
    assert_one_line_error(code, out, err, 1, "archive.npy", "not a .npy array file")
    assert "unexpected" not in err


def test_lengths_only_for_sequence_models(data_file, other_families, tmp_path, capsys):
    path, _ = data_file
    d, _, _ = other_families
    assert run(["fit", path, "--quiet", "--out", tmp_path / "m.npz"], capsys)[0] == 0
    assert_one_line_error(*run(["predict", tmp_path / "m.npz", path, "--lengths", d / "lengths.npy"], capsys), 2, "--lengths", "DPMixture")


def test_info_vocab_only_for_topic_models(data_file, other_families, tmp_path, capsys):
    path, _ = data_file
    d, _, _ = other_families
    assert run(["fit", path, "--quiet", "--out", tmp_path / "m.npz"], capsys)[0] == 0
    for model in (tmp_path / "m.npz", d / "hdphmm.npz"):
        assert_one_line_error(*run(["info", model, "--top-words", 3], capsys), 2, "apply to topic models")


def test_help_documents_other_families(capsys):
    code, out, _ = run(["predict", "--help"], capsys)
    assert code == 0 and "--lengths" in out and "one sequence" in " ".join(out.split()) and "transform" in out


# ---------------------------------------------------------------------------- topics
@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory):
    """A bars corpus as a scipy.sparse .npz, a .npy array and a .csv table, and its vocabulary."""
    import scipy.sparse as sp

    d = tmp_path_factory.mktemp("corpus")
    X = bnpcore.datasets.make_bars(n_docs=200, n_tokens=60, random_state=0)[0]
    sp.save_npz(d / "bars.npz", sp.csr_matrix(X))
    np.save(d / "bars.npy", X.toarray())
    np.savetxt(d / "bars.csv", X.toarray(), fmt="%d", delimiter=",")
    import scipy.io

    scipy.io.mmwrite(d / "bars.mtx", sp.coo_matrix(X))
    C = sp.coo_matrix(X)
    lines = [str(X.shape[0]), str(X.shape[1]), str(C.nnz)] + [f"{r + 1} {c + 1} {int(v)}" for r, c, v in zip(C.row, C.col, C.data)]
    (d / "docword.bars.txt").write_text("\n".join(lines) + "\n", encoding="ascii")
    vocab = [f"r{i // 30}c{i % 30}" for i in range(X.shape[1])]
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return d, X, vocab


def test_topics_fits_saves_and_prints_the_top_words(corpus_files, tmp_path, capsys):
    d, X, vocab = corpus_files
    out_model = tmp_path / "topics.npz"
    code, out, err = run(["topics", d / "bars.npz", "--vocab", d / "vocab.txt", "--top-words", 4, "--out", out_model], capsys)
    assert code == 0, err
    model = bnpcore.load(out_model)
    direct = bnpcore.HDPTopicModel(random_state=0).fit(X)  # the command's defaults are the estimator's
    assert isinstance(model, bnpcore.HDPTopicModel) and model.n_components_ == direct.n_components_
    np.testing.assert_array_equal(model.topics_, direct.topics_)
    assert "HDPTopicModel(alpha=0.5) on" in out and "200 documents x 900 words, 12000 tokens" in out
    assert f"topics:    {model.n_components_} with expected count >= 1" in out
    assert f"ELBO:      {model.elbo_:.6g}" in out and f"saved:     {out_model}" in out
    assert f"coherence: NPMI {model.coherence(X, measure='npmi').mean():.4f} (mean over the topics" in out
    words = model.top_words(4, vocabulary=vocab)
    heaviest = int(np.argmax(model.topic_weights_))
    assert f"{heaviest:4d}: {model.topic_weights_[heaviest]:.4f}  " + " ".join(words[heaviest]) in out
    assert "lap" in err  # the progress bar
    code, out, err = run(["info", out_model], capsys)
    assert code == 0 and "HDPTopicModel" in out and "topics:" in out and "top " not in out
    code, out, err = run(["info", out_model, "--vocab", d / "vocab.txt", "--top-words", 3], capsys)
    assert code == 0 and err == "" and "top 3 words by topic weight:" in out
    assert f"{heaviest:4d}: " + " ".join(model.top_words(3, vocabulary=vocab)[heaviest]) in out
    code, out, err = run(["info", out_model, "--top-words", 2], capsys)
    assert code == 0 and f"{heaviest:4d}: " + " ".join(map(str, model.top_words(2)[heaviest])) in out
    (tmp_path / "short.txt").write_text("a\nb\n", encoding="utf-8")
    assert_one_line_error(*run(["info", out_model, "--vocab", tmp_path / "short.txt"], capsys), 1, "has 2 words (lines)")


def test_topics_other_inputs_and_options(corpus_files, tmp_path, capsys):
    d, _, _ = corpus_files
    fits = []
    for name in ("bars.npz", "bars.npy", "bars.csv", "bars.mtx", "docword.bars.txt"):
        fmt = ["--format", "uci"] if name.startswith("docword") else []
        code, out, err = run(["topics", d / name, *fmt, "--model", "lda", "--n-components", 4, "--max-laps", 3, "--alpha", 2,
                              "--random-state", 1, "--threads", 1, "--out", tmp_path / f"{name}.model.npz"], capsys)
        assert code == 0, err
        fits.append(bnpcore.load(tmp_path / f"{name}.model.npz"))
        assert "FiniteTopicModel(alpha=2.0)" in out and "bnpcore: warning:" in err and "did not converge" in err
        assert "  0: " in out  # word ids without --vocab
    m = fits[0]
    assert isinstance(m, bnpcore.FiniteTopicModel) and m.n_components_ == 4 and m.n_iter_ == 3
    assert m.get_params()["alpha"] == 2.0 and m.get_params()["random_state"] == 1
    for other in fits[1:]:
        np.testing.assert_array_equal(other.topics_, m.topics_)
    code, out, err = run(["topics", d / "bars.npz", "--model", "lda", "--max-laps", 2, "--quiet", "--out", tmp_path / "q.npz"], capsys)
    assert code == 0 and out == "" and err == ""
    assert (tmp_path / "q.npz").exists()


def test_topics_from_several_batch_files(corpus_files, tmp_path, capsys):
    """Several .npz files are batches of one corpus, read when visited: the fit equals the
    estimator's on the same list of files."""
    import scipy.sparse as sp

    d, X, vocab = corpus_files
    paths = []
    for b, (lo, hi) in enumerate([(0, 70), (70, 140), (140, 200)]):
        paths.append(tmp_path / f"batch{b}.npz")
        sp.save_npz(paths[-1], sp.csr_matrix(X[lo:hi]))
    code, out, err = run(["topics", *paths, "--vocab", d / "vocab.txt", "--out", tmp_path / "m.npz"], capsys)
    assert code == 0, err
    model = bnpcore.load(tmp_path / "m.npz")
    direct = bnpcore.HDPTopicModel(random_state=0).fit([str(p) for p in paths])
    np.testing.assert_array_equal(model.topics_, direct.topics_)
    assert f"on 3 batch files ({paths[0]} ...): 200 documents x 900 words, 12000 tokens" in out
    assert "coherence:" not in out and " ".join(model.top_words(10, vocabulary=vocab)[0]) in out
    assert_one_line_error(*run(["topics", paths[0], d / "bars.csv"], capsys), 2, "several CORPUS files must all be scipy.sparse .npz")
    assert_one_line_error(*run(["topics", paths[0], paths[1], "--format", "uci"], capsys), 2, "several CORPUS files")
    assert_one_line_error(*run(["topics", paths[0], tmp_path / "gone.npz", "--out", tmp_path / "x.npz"], capsys), 1, "no such corpus file")
    assert_one_line_error(*run(["topics", paths[0], paths[1], "--out", paths[1]], capsys), 1, "would overwrite it")


def test_topics_errors_are_one_line(corpus_files, other_families, tmp_path, capsys):
    d, X, _ = corpus_files
    families, _, _ = other_families
    out = ["--out", tmp_path / "m.npz"]
    assert_one_line_error(*run(["topics", tmp_path / "missing.npz", *out], capsys), 1, "no such corpus file")
    assert_one_line_error(*run(["topics", families / "lda.npz", *out], capsys), 1, "is not a scipy.sparse .npz file")
    (tmp_path / "short.txt").write_text("a\nb\n", encoding="utf-8")
    assert_one_line_error(*run(["topics", d / "bars.npz", "--vocab", tmp_path / "short.txt", *out], capsys), 1,
                          "has 2 words (lines) but the corpus has 900 columns")
    assert_one_line_error(*run(["topics", d / "bars.npz", "--vocab", d / "bars.npz", *out], capsys), 1, "is not a UTF-8 text file")
    assert_one_line_error(*run(["topics", d / "bars.npz", "--vocab", tmp_path / "nope.txt", *out], capsys), 1, "no such vocabulary file")
    assert_one_line_error(*run(["topics", d / "bars.npz", "--out", d / "bars.npz"], capsys), 1, "would overwrite it")
    assert_one_line_error(*run(["topics", d / "bars.npz", "--vocab", d / "vocab.txt", "--out", d / "vocab.txt"], capsys), 1,
                          "would overwrite it")
    (tmp_path / "docword.bad.txt").write_text("2\n5\n2\n1 1 3\n3 2 1\n", encoding="ascii")
    assert_one_line_error(*run(["topics", tmp_path / "docword.bad.txt", "--format", "uci", *out], capsys), 1,
                          "document ids must lie in 1..2 and word ids in 1..5")
    (tmp_path / "docword.short.txt").write_text("2\n5\n3\n1 1 3\n2 2 1\n", encoding="ascii")
    assert_one_line_error(*run(["topics", tmp_path / "docword.short.txt", "--format", "uci", *out], capsys), 1,
                          "announces 3 entries of 3 numbers, the file holds 2 lines")
    assert_one_line_error(*run(["topics", d / "bars.csv", "--format", "uci", *out], capsys), 1, "is not a UCI bag-of-words file")
    (tmp_path / "junk.mtx").write_text("not a matrix\n", encoding="ascii")
    assert_one_line_error(*run(["topics", tmp_path / "junk.mtx", *out], capsys), 1, "is not a readable Matrix Market file")
    np.save(tmp_path / "neg.npy", -X.toarray())
    assert_one_line_error(*run(["topics", tmp_path / "neg.npy", "--quiet", *out], capsys), 1, "non-negative")
    assert_one_line_error(*run(["topics", d / "bars.npz", "--alpha", "0"], capsys), 2, "--alpha")
    assert_one_line_error(*run(["topics", d / "bars.npz", "--top-words", "0"], capsys), 2, "--top-words")
    assert_one_line_error(*run(["topics", d / "bars.npz", "--model", "nmf"], capsys), 2, "--model")
    assert not (tmp_path / "m.npz").exists()


def test_topics_help(capsys):
    code, out, _ = run(["--help"], capsys)
    assert code == 0 and "topics" in out
    code, out, _ = run(["topics", "--help"], capsys)
    text = " ".join(out.split())
    assert code == 0 and "scipy.sparse.save_npz" in text and "(default: hdp)" in text and "(default: 10)" in text
    assert "(default: None)" not in text and not re.search(r"\(default: [^)]*\) \(default:", text)


# ---------------------------------------------------------------------------- hmm
def test_hmm_fits_saves_and_predicts(other_families, tmp_path, capsys):
    d, S, lengths = other_families
    out_model = tmp_path / "hmm.npz"
    code, out, err = run(["hmm", d / "S.npy", "--lengths", d / "lengths.npy", "--n-components", 1, "--kappa", 50, "--out", out_model], capsys)
    assert code == 0, err
    model = bnpcore.load(out_model)
    direct = bnpcore.HDPHMM(n_components=1, kappa=50.0, random_state=0).fit(S, lengths)
    assert isinstance(model, bnpcore.HDPHMM) and model.n_components_ == direct.n_components_ >= 2
    np.testing.assert_array_equal(model.transmat_, direct.transmat_)
    np.testing.assert_array_equal(model.means_, direct.means_)
    assert f"HDPHMM(obs='gauss', kappa=50.0) on {d / 'S.npy'}: 4 sequence(s), {S.shape[0]} steps x {S.shape[1]} features" in out
    assert f"states:    {model.n_components_} with expected count >= 1" in out and f"ELBO:      {model.elbo_:.6g}" in out
    assert "self-transition probabilities of the largest states: " in out and f"saved:     {out_model}" in out
    code, out, err = run(["predict", out_model, d / "S.npy", "--lengths", d / "lengths.npy", "--out", tmp_path / "z.npy"], capsys)
    assert code == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "z.npy"), direct.predict(S, lengths))


def test_hmm_options_and_one_sequence(other_families, tmp_path, capsys):
    d, S, _ = other_families
    code, out, err = run(["hmm", d / "S.npy", "--lengths", d / "lengths.txt", "--model", "finite", "--obs", "diag_gauss",
                          "--n-components", 3, "--max-laps", 2, "--random-state", 4, "--threads", 1, "--out", tmp_path / "f.npz"], capsys)
    assert code == 0, err
    m = bnpcore.load(tmp_path / "f.npz")
    assert isinstance(m, bnpcore.FiniteHMM) and m.n_components_ <= 3 and m.n_iter_ == 2
    assert m.get_params()["obs"] == "diag_gauss" and m.get_params()["random_state"] == 4
    status = "converged" if m.converged_ else "not converged (max laps reached)"
    assert f"laps:      2, {status}" in out
    if not m.converged_:
        assert "bnpcore: warning:" in err and "did not converge" in err
    code, out, err = run(["hmm", d / "S.npy", "--obs", "ar_gauss", "--max-laps", 3, "--quiet", "--out", tmp_path / "one.npz"], capsys)
    assert code == 0 and out == "" and err == ""  # no --lengths: DATA is one sequence
    one = bnpcore.load(tmp_path / "one.npz")
    assert one.get_params()["obs"] == "ar_gauss" and one.coef_.shape[1:] == (S.shape[1], S.shape[1])


def test_hmm_errors_are_one_line(other_families, tmp_path, capsys):
    d, S, _ = other_families
    out = ["--out", tmp_path / "m.npz"]
    np.save(tmp_path / "bad_lengths.npy", np.array([10, 20]))
    assert_one_line_error(*run(["hmm", d / "S.npy", "--lengths", tmp_path / "bad_lengths.npy", "--quiet", *out], capsys), 1, "lengths")
    assert_one_line_error(*run(["hmm", d / "S.npy", "--lengths", tmp_path / "none.npy", *out], capsys), 1, "no such lengths file")
    assert_one_line_error(*run(["hmm", tmp_path / "none.npy", *out], capsys), 1, "no such data file")
    assert_one_line_error(*run(["hmm", d / "S.npy", "--out", d / "S.npy"], capsys), 1, "would overwrite it")
    assert_one_line_error(*run(["hmm", d / "S.npy", "--lengths", d / "lengths.npy", "--out", d / "lengths.npy"], capsys), 1,
                          "would overwrite it")
    bad = S.copy()
    bad[5, 0] = np.inf
    np.save(tmp_path / "inf.npy", bad)
    assert_one_line_error(*run(["hmm", tmp_path / "inf.npy", "--quiet", *out], capsys), 1, "infinity")
    assert_one_line_error(*run(["hmm", d / "S.npy", "--kappa", "-1"], capsys), 2, "--kappa")
    assert_one_line_error(*run(["hmm", d / "S.npy", "--obs", "poisson"], capsys), 2, "--obs")
    assert not (tmp_path / "m.npz").exists()
    code, out, _ = run(["hmm", "--help"], capsys)
    text = " ".join(out.split())
    assert code == 0 and "--lengths" in text and "(default: hdp)" in text and "(default: None)" not in text


# ---------------------------------------------------------------------------- real processes


def python_m(*args, cwd):
    env = dict(os.environ, PYTHONWARNINGS="error")
    return subprocess.run([sys.executable, "-m", "bnpcore", *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def test_python_m_bnpcore(data_file, tmp_path):
    path, X = data_file
    res = python_m("fit", path, "--model", "dp", "--obs", "gauss", "--out", "model.npz", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "saved:     model.npz" in res.stdout
    res = python_m("info", "model.npz", cwd=tmp_path)
    assert res.returncode == 0 and "clusters:  2" in res.stdout
    res = python_m("predict", "model.npz", path, "--out", "labels.npy", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "labels.npy"), bnpcore.load(tmp_path / "model.npz").predict(X))
    for argv, want in [(("fit", path, "--model", "x"), 2), (("info", "nothing.npz"), 1)]:
        res = python_m(*argv, cwd=tmp_path)
        assert res.returncode == want
        assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_console_script_is_declared_and_runs(tmp_path):
    """The installed distribution declares the `bnpcore` console script (pyproject
    [project.scripts]); where the script is on PATH, it runs."""
    eps = importlib.metadata.entry_points()
    group = eps.select(group="console_scripts") if hasattr(eps, "select") else eps.get("console_scripts", [])
    declared = {ep.name: ep.value for ep in group if ep.value.startswith("bnpcore.")}
    assert declared == {"bnpcore": "bnpcore.cli:main"}
    script = shutil.which("bnpcore", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    assert script is not None, "the bnpcore console script is not installed next to this Python"
    res = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and bnpcore.__version__ in res.stdout


def test_out_never_overwrites_an_input_file(data_file, tmp_path, capsys):
    path, _ = data_file
    before = path.read_bytes()
    assert_one_line_error(*run(["fit", path, "--max-laps", "2", "--out", path], capsys), 1, "--out", "overwrite")
    assert path.read_bytes() == before
    model_path = tmp_path / "m.npz"
    assert run(["fit", path, "--max-laps", "2", "--quiet", "--out", model_path], capsys)[0] == 0
    model_bytes = model_path.read_bytes()
    for target in (path, model_path):
        assert_one_line_error(*run(["predict", model_path, path, "--out", target], capsys), 1, "overwrite")
    assert path.read_bytes() == before and model_path.read_bytes() == model_bytes



def test_npy_file_holding_an_archive_is_refused_by_name(data_file, tmp_path, capsys):
    _, X = data_file
    fake = tmp_path / "archive.npy"
    with open(fake, "wb") as f:
        np.savez(f, X=X)
    code, out, err = run(["fit", fake], capsys)
    assert_one_line_error(code, out, err, 1, "archive.npy", "not a .npy array file")
    assert "unexpected" not in err


def test_predict_writes_exactly_the_out_path_it_reports(data_file, tmp_path, capsys):
    path, X = data_file
    model_path = tmp_path / "m.npz"
    assert run(["fit", path, "--max-laps", "2", "--quiet", "--out", model_path], capsys)[0] == 0
    out = tmp_path / "labels.bin"
    code, stdout, err = run(["predict", model_path, path, "--out", out], capsys)
    assert code == 0, err
    assert f"saved to {out}" in stdout
    assert out.exists() and not (tmp_path / "labels.bin.npy").exists()
    np.testing.assert_array_equal(np.load(out), bnpcore.load(model_path).predict(X))
