"""The command line (issue 14, part 6): ``bnpcore fit | info | predict``.

Most tests call :func:`bnpcore.cli.main` in-process (fast); a few run ``python -m bnpcore`` in
a subprocess to check the module entry point, exit statuses and that no traceback is printed.
"""

import importlib.metadata
import os
import shutil
import subprocess
import sys

import bnpcore
import numpy as np
import pytest
from bnpcore.cli import main


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
        (["fit", "{data}", "--random-state", "-3"], "--random-state: expected a non-negative integer"),
        (["fit", "{data}", "--moves", "birth,split"], "--moves"),
        (["fit", "{data}", "--model", "finite", "--moves", "merge"], "--moves need --model dp"),
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
