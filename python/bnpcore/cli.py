"""The ``bnpcore`` command line: fit a mixture, a topic model or an HMM, inspect a model file, predict labels.

::

    bnpcore fit DATA.npy [--model dp] [--obs gauss] [--out DATA.model.npz] ...
    bnpcore topics CORPUS.npz [--model hdp] [--vocab VOCAB.txt] [--out CORPUS.model.npz] ...
    bnpcore hmm DATA.npy [--lengths LENGTHS.npy] [--model hdp] [--kappa 0] [--out DATA.model.npz] ...
    bnpcore info MODEL.npz
    bnpcore predict MODEL.npz DATA.npy [--out DATA.labels.npy] [--proba] [--lengths LENGTHS.npy]

``topics`` fits an HDP topic model (or LDA, ``--model lda``) to document-word counts, one
document per row: a ``scipy.sparse.save_npz`` file, a Matrix Market file (``.mm``/``.mtx``, as
gensim's ``MmCorpus`` writes) or a UCI bag-of-words ``docword`` file (``--format uci``), all
kept sparse, or a ``.npy`` array or a numeric text table; it prints the topics' most probable
words (``--vocab``: a text file with one word per line, in column order). ``hmm`` fits a sticky
HDP-HMM (or a finite HMM) to sequences given hmmlearn's way: DATA is their concatenation and
``--lengths`` the length of each.

``info`` describes a model file of any registered model type (mixtures, topic models, HMMs).
``predict`` gives the cluster labels of a mixture and the state path of an HMM (``--lengths``:
the length of every sequence in DATA; without it DATA is one sequence); topic models have no
labels and are refused (use ``transform`` in Python for document-topic proportions).

also available as ``python -m bnpcore ...``. ``DATA`` is a ``.npy`` file of shape
(n_samples, n_features) (read batch by batch, never copied whole) or a numeric text file
(``.csv`` comma-separated, any other extension whitespace-separated; one header line is
skipped). Every option has a default, so ``bnpcore fit DATA.npy`` alone fits a Dirichlet-process
mixture of full-covariance Gaussians by memoized inference with birth, merge and delete moves.

Errors (bad arguments, unreadable or corrupted files, invalid data, and any unexpected
failure) are reported as one line on standard error, with exit status 2 for usage errors and 1
for the others; never a traceback. Only the public API is used (:class:`bnpcore.DPMixture`,
:class:`bnpcore.FiniteMixture`, :class:`bnpcore.HDPTopicModel`, :class:`bnpcore.FiniteTopicModel`,
:class:`bnpcore.HDPHMM`, :class:`bnpcore.FiniteHMM`, :func:`bnpcore.load`, ``model.save``).
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from bnpcore._validation import same_file

__all__ = ["main"]

PROG = "bnpcore"
OBS_CHOICES = ("gauss", "diag_gauss", "zero_mean_gauss", "mult", "bern")
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class _UsageError(Exception):
    """A bad command line (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse, but an error is one line (no usage block) and raised rather than exiting."""

    def error(self, message):
        raise _UsageError(f"{self.prog}: error: {message} (see `{self.prog} --help`)")


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends ``(default: ...)`` only where the help does not describe the default itself and
    there is one to show (not for flags, nor for None, which the help text explains)."""

    def _get_help_string(self, action):
        help_text = action.help or ""
        if "default" in help_text or action.default is None or action.default is False or action.default is argparse.SUPPRESS:
            return help_text
        return super()._get_help_string(action)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (value > 0 and np.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got {text!r}") from None
    if not (value >= 0 and np.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got {text!r}")
    return value


def _seed(text: str):
    if text.lower() == "none":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer or 'none', got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer or 'none', got {text!r}")
    return value


def _moves(text: str):
    if text == "auto":
        return None
    if text == "none":
        return ()
    moves = tuple(m.strip() for m in text.split(",") if m.strip())
    bad = [m for m in moves if m not in ("birth", "merge", "delete")]
    if bad or not moves:
        raise argparse.ArgumentTypeError(f"expected 'auto', 'none' or a comma-separated subset of birth,merge,delete, got {text!r}")
    return moves


def _add_run_options(parser, input_name: str) -> None:
    """The options every fitting command shares: seed, threads, output file (named after
    ``input_name``), quiet."""
    parser.add_argument("--random-state", type=_seed, default=0, help="seed, or 'none' for a fresh one")
    parser.add_argument("--threads", type=_positive_int, default=None, help="threads of the Rust kernels (default: all cores)")
    parser.add_argument("--out", default=None, help=f"model file to write (default: {input_name} with extension .model.npz)")
    parser.add_argument("--quiet", action="store_true", help="print only errors (no progress bar, summary or warnings)")


def _build_parser() -> _Parser:
    from bnpcore import __version__

    parser = _Parser(
        prog=PROG,
        description="Fit Bayesian nonparametric mixtures, topic models and hidden Markov models by variational inference (bnpcore).",
        epilog="Run `bnpcore COMMAND --help` for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"bnpcore {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    fmt = _HelpFormatter

    fit = sub.add_parser(
        "fit",
        help="fit a mixture to a data file and save the model",
        description="Fit a mixture to DATA and save the model (load it in Python with bnpcore.load).",
        formatter_class=fmt,
    )
    fit.add_argument("data", metavar="DATA", help="data file: .npy of shape (n_samples, n_features), or .csv / .txt")
    fit.add_argument("--model", choices=("dp", "finite"), default="dp", help="Dirichlet-process mixture or finite mixture")
    fit.add_argument("--obs", choices=OBS_CHOICES, default="gauss", help="observation model")
    fit.add_argument(
        "--n-components", type=_positive_int, default=None, help="initial number of clusters K (default: 1 for dp, 10 for finite)"
    )
    fit.add_argument("--gamma", type=_positive_float, default=1.0, help="concentration of the allocation prior")
    fit.add_argument(
        "--algorithm", choices=("auto", "full", "memoized", "stochastic"), default="auto",
        help="learning algorithm ('auto': memoized for dp, full for finite)"
    )
    fit.add_argument("--max-laps", type=_positive_int, default=100, help="maximum passes through the data")
    fit.add_argument("--tol", type=_non_negative_float, default=1e-6, help="relative ELBO change at convergence (0: stop only on an unchanged ELBO)")
    fit.add_argument(
        "--n-batches", type=_positive_int, default=None,
        help="batches of memoized/stochastic learning (default: from the number of rows, one below 10,000, ten from 50,000)"
    )
    fit.add_argument(
        "--moves",
        type=_moves,
        default="auto",
        metavar="MOVES",
        help="'auto' (birth,merge,delete for --model dp unless --algorithm stochastic), 'none', or e.g. 'merge,delete'",
    )
    fit.add_argument("--top-l", type=_positive_int, default=None, help="keep at most L clusters per row (default: dense)")
    _add_run_options(fit, "DATA")

    topics = sub.add_parser(
        "topics",
        help="fit a topic model to document-word counts and save it",
        description=(
            "Fit an HDP topic model (or LDA) to the document-word counts of CORPUS, one document per row, print the topics' "
            "most probable words and save the model (load it in Python with bnpcore.load)."
        ),
        formatter_class=fmt,
    )
    topics.add_argument(
        "corpus", metavar="CORPUS", nargs="+",
        help="counts, one document per row: a scipy.sparse .npz file (scipy.sparse.save_npz), a Matrix Market .mm / .mtx "
        "file (gensim's MmCorpus), a UCI docword file (--format uci), a .npy array, or a .csv / .txt table; several .npz "
        "files are batches of one corpus, read one at a time (corpora larger than memory)"
    )
    topics.add_argument(
        "--format", choices=("auto", "uci"), default="auto",
        help="'auto': from the extension; 'uci': the UCI bag-of-words docword format (D, W, NNZ, then 'doc word count' lines)"
    )
    topics.add_argument("--model", choices=("hdp", "lda"), default="hdp", help="HDP topic model (finds the number of topics) or LDA")
    topics.add_argument(
        "--n-components", type=_positive_int, default=None, help="initial number of topics (default: the estimator's: hdp grows from 1 by births, lda keeps 10)"
    )
    topics.add_argument("--alpha", type=_positive_float, default=0.5, help="document concentration")
    topics.add_argument("--max-laps", type=_positive_int, default=None, help="maximum passes through the corpus (default: the estimator's)")
    topics.add_argument("--vocab", default=None, metavar="VOCAB", help="text file with one word per line, in column order (default: word ids)")
    topics.add_argument("--top-words", type=_positive_int, default=10, help="words printed per topic")
    _add_run_options(topics, "the (first) CORPUS")

    hmm = sub.add_parser(
        "hmm",
        help="fit a hidden Markov model to sequences and save it",
        description=(
            "Fit a sticky HDP hidden Markov model (or a finite HMM) to the sequences of DATA, concatenated as in hmmlearn "
            "(--lengths: the length of each; otherwise DATA is one sequence), print the states found and save the model "
            "(load it in Python with bnpcore.load)."
        ),
        formatter_class=fmt,
    )
    hmm.add_argument("data", metavar="DATA", help="data file: .npy of shape (n_steps, n_features), or .csv / .txt")
    hmm.add_argument(
        "--lengths", default=None, metavar="LENGTHS",
        help=".npy (or text) file of the length of every sequence in DATA, summing to its rows (default: DATA is one sequence)"
    )
    hmm.add_argument("--model", choices=("hdp", "finite"), default="hdp", help="sticky HDP-HMM (finds the number of states) or finite HMM")
    hmm.add_argument("--obs", choices=(*OBS_CHOICES, "ar_gauss"), default="gauss", help="emission model")
    hmm.add_argument("--n-components", type=_positive_int, default=None, help="initial number of states (default: the estimator's, 10)")
    hmm.add_argument("--kappa", type=_non_negative_float, default=0.0, help="sticky self-transition mass")
    hmm.add_argument("--max-laps", type=_positive_int, default=None, help="maximum passes through the data (default: the estimator's)")
    _add_run_options(hmm, "DATA")

    info = sub.add_parser(
        "info",
        help="describe a saved model",
        description=(
            "Describe a model file written by `bnpcore fit` or by `save` in Python (mixtures, topic models, HMMs): "
            "its type and main parameters and, if fitted, the components found, ELBO, laps, convergence and the largest components."
        ),
    )
    info.add_argument("model", metavar="MODEL", help="model file (.npz)")
    info.add_argument(
        "--vocab", default=None, metavar="VOCAB",
        help="topic models: text file with one word per line, in column order, to print each topic's top words by name"
    )
    info.add_argument("--top-words", type=_positive_int, default=None, help="topic models: print each topic's N most probable words")

    predict = sub.add_parser(
        "predict",
        help="cluster labels of new data",
        description=(
            "Most responsible cluster of each row of DATA under a saved mixture, or the most likely state of each row "
            "under a saved HMM (DATA: the sequences concatenated; give their lengths with --lengths, otherwise DATA is one "
            "sequence). Topic models have no labels: use their transform method in Python for document-topic proportions."
        ),
        formatter_class=fmt,
    )
    predict.add_argument("model", metavar="MODEL", help="model file (.npz)")
    predict.add_argument("data", metavar="DATA", help="data file: .npy, .csv or .txt")
    predict.add_argument("--out", default=None, help="output .npy (default: DATA with extension .labels.npy, .proba.npy with --proba)")
    predict.add_argument("--proba", action="store_true", help="save the responsibilities (n_samples, K) instead of labels")
    predict.add_argument(
        "--lengths",
        default=None,
        metavar="LENGTHS",
        help="HMMs only: .npy (or text) file of the length of every sequence in DATA, summing to its rows (default: DATA is one sequence)",
    )
    predict.add_argument("--quiet", action="store_true", help="print nothing on success")
    return parser


# ------------------------------------------------------------------------------------- data files


def _load_text(path: str) -> np.ndarray:
    delimiter = "," if path.lower().endswith(".csv") else None
    with warnings.catch_warnings():  # numpy warns about a file without rows: reported as one error line below
        warnings.filterwarnings("ignore", message=".*input contained no data", category=UserWarning)
        try:
            X = np.loadtxt(path, delimiter=delimiter, ndmin=2, dtype=np.float64)
        except ValueError as first:
            try:  # one header line
                X = np.loadtxt(path, delimiter=delimiter, ndmin=2, dtype=np.float64, skiprows=1)
            except ValueError:
                raise ValueError(f"{path!r} is not a numeric table: {first}") from None
    if X.shape[0] == 0:
        raise ValueError(f"{path!r} holds no data rows")
    return X


def _check_input_file(path: str, what: str) -> None:
    """Refuse a missing path or a directory given as the ``what`` file (data, lengths)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such {what} file: {path!r}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path!r} is a directory, not a {what} file")


def _load_npy(path: str, label: str, mmap_mode=None) -> np.ndarray:
    """The array of a ``.npy`` file (no pickle); an unreadable file, or an ``.npz`` archive (a
    model file) under a ``.npy`` name, is a ValueError naming it (``label`` prefixes the name,
    e.g. ``"--lengths "``)."""
    try:
        arr = np.load(path, mmap_mode=mmap_mode, allow_pickle=False)
    except Exception as exc:
        raise ValueError(f"{path!r} is not a readable .npy file: {exc}") from None
    if not isinstance(arr, np.ndarray):
        raise ValueError(f"{label}{path!r} is not a .npy array file (numpy.load gives a {type(arr).__name__})")
    return arr


def _open_data(path: str):
    """``(X, n_rows, n_features)`` for a data file; a ``.npy`` file stays on disk (its path is
    returned, and the estimators read it batch by batch)."""
    _check_input_file(path, "data")
    if path.lower().endswith(".npy"):
        arr = _load_npy(path, "", mmap_mode="r")
        if arr.ndim != 2:
            raise ValueError(f"{path!r} holds an array of shape {arr.shape}; expected (n_samples, n_features)")
        return path, int(arr.shape[0]), int(arr.shape[1])
    if path.lower().endswith(".npz"):
        raise ValueError(f"{path!r}: .npz archives are not data files; save the array with numpy.save as .npy")
    X = _load_text(path)
    return X, X.shape[0], X.shape[1]


def _open_corpus(path: str, fmt: str = "auto"):
    """Document-word counts of the ``topics`` command, kept sparse: a scipy.sparse ``.npz``
    file, a Matrix Market file (``.mm``/``.mtx``, as gensim's ``MmCorpus`` writes), the UCI
    bag-of-words format (``fmt="uci"``), a ``.npy`` array or a numeric text table."""
    import scipy.sparse as sp

    _check_input_file(path, "corpus")
    lower = path.lower()
    if fmt == "uci":
        return _read_uci(path)
    if lower.endswith(".npz"):
        try:
            return sp.load_npz(path)
        except Exception as exc:  # a model file, or any other archive
            raise ValueError(f"{path!r} is not a scipy.sparse .npz file (written by scipy.sparse.save_npz): {exc}") from None
    if lower.endswith((".mm", ".mtx")):
        import scipy.io

        try:
            A = scipy.io.mmread(path)
        except Exception as exc:
            raise ValueError(f"{path!r} is not a readable Matrix Market file: {' '.join(str(exc).split())}") from None
        return sp.csr_array(A) if sp.issparse(A) else np.asarray(A)
    return _read_array(path)


def _read_uci(path: str):
    """A UCI bag-of-words ``docword`` file: the numbers of documents, words and entries on the
    first three lines, then one ``docID wordID count`` line per entry (ids from 1)."""
    import scipy.sparse as sp

    try:
        with open(path, encoding="ascii") as fh:
            head = [fh.readline() for _ in range(3)]
            n_docs, n_words, nnz = (int(h) for h in head)
            body = np.loadtxt(fh, dtype=np.int64, ndmin=2) if nnz else np.zeros((0, 3), dtype=np.int64)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path!r} is not a UCI bag-of-words file (D, W and NNZ lines, then 'docID wordID count' lines): "
                         f"{' '.join(str(exc).split())}") from None
    if body.shape != (nnz, 3):
        raise ValueError(f"{path!r}: the header announces {nnz} entries of 3 numbers, the file holds {body.shape[0]} lines of {body.shape[1]}")
    d, w, c = body.T
    if nnz and (d.min() < 1 or d.max() > n_docs or w.min() < 1 or w.max() > n_words):
        raise ValueError(f"{path!r}: document ids must lie in 1..{n_docs} and word ids in 1..{n_words} (the header's D and W)")
    return sp.csr_array((c.astype(np.float64), (d - 1, w - 1)), shape=(n_docs, n_words))


def _read_vocab(path: str, n_vocab: int) -> list[str]:
    """The ``--vocab`` file: one word per line (UTF-8), exactly one for each column."""
    _check_input_file(path, "vocabulary")
    try:
        with open(path, encoding="utf-8") as fh:
            words = [line.rstrip("\r\n") for line in fh]
    except UnicodeDecodeError as exc:
        raise ValueError(f"--vocab {path!r} is not a UTF-8 text file: {exc}") from None
    if words and words[-1] == "":
        words.pop()
    if len(words) != n_vocab:
        raise ValueError(f"--vocab {path!r} has {len(words)} words (lines) but the corpus has {n_vocab} columns")
    return words


def _read_array(path: str) -> np.ndarray:
    X, _, _ = _open_data(path)
    if isinstance(X, str):
        return np.load(X, allow_pickle=False)
    return X


def _default_out(data: str, suffix: str) -> str:
    p = Path(data)
    return str(p.with_name(p.stem + suffix))


def _check_out(path: str, option: str = "--out", inputs: tuple[str, ...] = ()) -> None:
    """Refuse an output path that cannot be written, or that is one of the ``inputs`` (which
    it would overwrite), before any work is done."""
    for given in inputs:
        if same_file(given, path):
            raise ValueError(f"{option} {path!r} is the input file {given!r}: writing there would overwrite it")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"{option} {path!r}: directory {directory!r} does not exist")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{option} {path!r} is a directory")
    if not os.access(directory, os.W_OK):
        raise PermissionError(f"{option} {path!r}: directory {directory!r} is not writable")


def _read_lengths(path: str) -> np.ndarray:
    """The sequence lengths of ``--lengths``: a ``.npy`` array or a numeric text file (validated by the model)."""
    _check_input_file(path, "lengths")
    if path.lower().endswith(".npy"):
        return _load_npy(path, "--lengths ")
    delimiter = "," if path.lower().endswith(".csv") else None
    try:
        return np.loadtxt(path, delimiter=delimiter, ndmin=1, dtype=np.float64)
    except ValueError as exc:
        raise ValueError(f"--lengths {path!r} is not a numeric file: {exc}") from None


def _family(model) -> tuple[str, str]:
    """(components, what they count) in the words of the model's family."""
    import bnpcore

    if isinstance(model, (bnpcore.HDPTopicModel, bnpcore.FiniteTopicModel)):
        return "topics", "expected tokens"
    if isinstance(model, (bnpcore.HDPHMM, bnpcore.FiniteHMM)):
        return "states", "expected time steps"
    return "clusters", "expected rows"


def _takes_lengths(model) -> bool:
    try:
        return "lengths" in inspect.signature(model.predict).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return False


# ------------------------------------------------------------------------------------- commands


def _fit(args) -> int:
    import bnpcore

    X, n_rows, n_features = _open_data(args.data)
    out = args.out or _default_out(args.data, ".model.npz")
    _check_out(out, inputs=(args.data,))  # before fitting, not after
    cls = bnpcore.DPMixture if args.model == "dp" else bnpcore.FiniteMixture
    if args.moves and args.model != "dp":
        raise _UsageError(f"{PROG} fit: error: --moves needs --model dp")
    model = cls(
        obs=args.obs,
        n_components=args.n_components,
        gamma=args.gamma,
        algorithm=args.algorithm,
        n_batches=args.n_batches,
        max_laps=args.max_laps,
        tol=args.tol,
        moves=args.moves,
        top_l=args.top_l,
        random_state=args.random_state,
        n_threads=args.threads,
        verbose=not args.quiet,
    )
    seconds = _fit_and_save(model, out, args.quiet, X)
    if not args.quiet:
        print(f"{type(model).__name__}(obs={args.obs!r}, algorithm={model._algorithm()!r}) on {args.data}: {n_rows} rows x {n_features} features")
        _print_fit(model, seconds, n_rows, "row")
        print(_cluster_table(model))
        print(f"saved:     {out}")
    return EXIT_OK


def _topics(args) -> int:
    import bnpcore

    paths = list(args.corpus)
    if len(paths) > 1:
        # batches larger than memory together: the estimator reads each file when it visits it
        if args.format != "auto" or not all(p.lower().endswith(".npz") for p in paths):
            raise _UsageError(f"{PROG} topics: error: several CORPUS files must all be scipy.sparse .npz batches (--format auto)")
        for p in paths:
            _check_input_file(p, "corpus")
        # (one batch read before fitting, and only to check --vocab against its width)
        n_vocab = _open_corpus(paths[0]).shape[1] if args.vocab is not None else None
        X = paths
    else:
        X = _open_corpus(paths[0], args.format)
        n_vocab = X.shape[1]
    corpus_name = paths[0] if len(paths) == 1 else f"{len(paths)} batch files ({paths[0]} ...)"
    out = args.out or _default_out(paths[0], ".model.npz")
    _check_out(out, inputs=tuple(p for p in (*paths, args.vocab) if p is not None))  # before fitting, not after
    vocab = _read_vocab(args.vocab, n_vocab) if args.vocab is not None else None
    cls = bnpcore.HDPTopicModel if args.model == "hdp" else bnpcore.FiniteTopicModel
    kw = {} if args.max_laps is None else {"max_laps": args.max_laps}
    if args.n_components is not None:
        kw["n_components"] = args.n_components
    model = cls(alpha=args.alpha, random_state=args.random_state, n_threads=args.threads, verbose=not args.quiet, **kw)
    seconds = _fit_and_save(model, out, args.quiet, X)
    n_vocab = int(model.n_features_in_)
    if not args.quiet:
        G = model.summaries_
        n_docs, tokens = (X.shape[0], float(X.sum())) if len(paths) == 1 else (int(round(float(G["D"]))), float(np.sum(G.N)))
        print(f"{type(model).__name__}(alpha={args.alpha!r}) on {corpus_name}: {n_docs} documents x {n_vocab} words, {tokens:.0f} tokens")
        _print_fit(model, seconds, max(tokens, 1.0), "token")
        if n_vocab >= 2 and len(paths) == 1:  # (not over batch files: that would read them all at once)
            npmi = model.coherence(X, n_words=min(10, n_vocab), measure="npmi")
            print(f"coherence: NPMI {npmi.mean():.4f} (mean over the topics of their {min(10, n_vocab)} top words' document co-occurrence in the corpus)")
        _print_top_words(model, args.top_words, vocab, weights=True)
        print(f"saved:     {out}")
    return EXIT_OK


def _hmm(args) -> int:
    import bnpcore

    X = _read_array(args.data)
    lengths = _read_lengths(args.lengths) if args.lengths is not None else None
    out = args.out or _default_out(args.data, ".model.npz")
    _check_out(out, inputs=tuple(p for p in (args.data, args.lengths) if p is not None))  # before fitting, not after
    cls = bnpcore.HDPHMM if args.model == "hdp" else bnpcore.FiniteHMM
    kw = {name: value for name, value in (("n_components", args.n_components), ("max_laps", args.max_laps)) if value is not None}
    model = cls(obs=args.obs, kappa=args.kappa, random_state=args.random_state, n_threads=args.threads, verbose=not args.quiet, **kw)
    seconds = _fit_and_save(model, out, args.quiet, X, lengths)
    if not args.quiet:
        n_seqs = 1 if lengths is None else int(np.size(lengths))
        print(f"{type(model).__name__}(obs={args.obs!r}, kappa={args.kappa!r}) on {args.data}: {n_seqs} sequence(s), "
              f"{X.shape[0]} steps x {X.shape[1]} features")
        _print_fit(model, seconds, X.shape[0], "step")
        print(_cluster_table(model))
        stay = np.diag(np.asarray(model.transmat_))
        print("self-transition probabilities of the largest states: "
              + ", ".join(f"{k}: {stay[k]:.3f}" for k in np.argsort(-np.asarray(model.counts_), kind="stable")[:10]))
        print(f"saved:     {out}")
    return EXIT_OK


def _fit_and_save(model, out: str, quiet: bool, *data) -> float:
    """Fit ``model`` to ``data``, save it to ``out`` and report its warnings as one line each
    (unless ``quiet``); returns the fitting seconds."""
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(*data)
    seconds = time.perf_counter() - start
    model.set_params(verbose=False)  # the saved model does not draw progress bars when refitted
    model.save(out)
    if not quiet:
        for w in caught:
            print(f"{PROG}: warning: {w.message}", file=sys.stderr)
    return seconds


def _print_fit(model, seconds: float, n_units: float, unit: str) -> None:
    """The summary lines every fitting command prints: components found, ELBO (also per
    ``unit``: row, token, step), laps and convergence, seconds."""
    what, _ = _family(model)
    status = "converged" if model.converged_ else "not converged (max laps reached)"
    print(f"{what + ':':<10} {model.n_components_} with expected count >= 1 ({model.counts_.size} represented)")
    print(f"ELBO:      {model.elbo_:.6g} ({model.elbo_ / n_units:.6g} per {unit})")
    print(f"laps:      {model.n_iter_}, {status}")
    print(f"time:      {seconds:.2f} s")


def _print_top_words(model, n: int, vocab, *, weights: bool) -> None:
    """A topic model's ``n`` most probable words per topic (names from ``vocab``, else word
    ids), heaviest topic first, with the topics' weights if ``weights``."""
    n = min(n, int(model.n_features_in_))
    words = model.top_words(n, vocabulary=vocab) if vocab is not None else model.top_words(n).tolist()
    w = np.asarray(model.topic_weights_)
    print(f"topics by weight (index: weight, top {n} words):" if weights else f"top {n} words by topic weight:")
    for k in np.argsort(-w, kind="stable"):
        print(f"  {k:4d}: " + (f"{w[k]:.4f}  " if weights else "") + " ".join(map(str, words[k])))


def _cluster_table(model, top: int = 10) -> str:
    what, counted = _family(model)
    counts = np.asarray(model.counts_)
    weights = getattr(model, "weights_", getattr(model, "topic_weights_", None))
    order = np.argsort(-counts, kind="stable")[:top]
    if weights is None:
        lines = [f"largest {what} (index: {counted}):"]
        lines += [f"  {k:4d}: {counts[k]:.1f}" for k in order]
    else:
        lines = [f"largest {what} (index: weight, {counted}):"]
        lines += [f"  {k:4d}: {weights[k]:.4f}, {counts[k]:.1f}" for k in order]
    if counts.size > top:
        lines.append(f"  ... {counts.size - top} more")
    return "\n".join(lines)


def _info(args) -> int:
    import bnpcore

    model = bnpcore.load(args.model)
    topic_model = hasattr(model, "top_words")
    if (args.vocab is not None or args.top_words is not None) and not topic_model:
        raise _UsageError(f"{PROG} info: error: --vocab and --top-words apply to topic models, not to the {type(model).__name__} in {args.model!r}")
    params = model.get_params()
    print(f"{args.model}: {type(model).__name__}, {os.path.getsize(args.model)} bytes")
    shown = [name for name in ("obs", "algorithm", "gamma", "alpha", "kappa", "n_components") if name in params]
    if shown:
        print(", ".join(f"{name}={params[name]!r}" for name in shown))
    fitted = hasattr(model, "n_components_")
    if not fitted:
        print("not fitted")
        return EXIT_OK
    what, _ = _family(model)
    counts = getattr(model, "counts_", None)
    status = "converged" if getattr(model, "converged_", False) else "not converged"
    history = getattr(model, "history_", None) or {}
    laps = len(history.get("lap", ()))
    if hasattr(model, "n_features_in_"):
        print(f"features:  {model.n_features_in_}")
    represented = f" ({np.size(counts)} represented)" if counts is not None else ""
    print(f"{what + ':':<10} {model.n_components_} with expected count >= 1{represented}")
    if hasattr(model, "elbo_"):
        print(f"ELBO:      {model.elbo_:.6g}")
    seconds = history.get("seconds", ())
    if laps:
        print(f"laps:      {laps} in total, {status}" + (f"; {seconds[-1]:.2f} s" if len(seconds) else ""))
    else:
        print("laps:      0")
    if counts is not None:
        print(_cluster_table(model))
    if topic_model and (args.vocab is not None or args.top_words is not None):
        vocab = _read_vocab(args.vocab, int(model.n_features_in_)) if args.vocab is not None else None
        _print_top_words(model, args.top_words or 10, vocab, weights=False)
    return EXIT_OK


def _predict(args) -> int:
    import bnpcore

    model = bnpcore.load(args.model)
    name = type(model).__name__
    if not hasattr(model, "predict"):
        hint = "; use its transform method in Python (bnpcore.load(MODEL).transform(X)) for the document-topic proportions" if hasattr(model, "transform") else ""
        raise ValueError(f"the {name} in {args.model!r} has no labels to predict{hint}")
    sequences = _takes_lengths(model)
    if args.lengths is not None and not sequences:
        raise _UsageError(f"{PROG} predict: error: --lengths applies to sequence models (HMMs), not to the {name} in {args.model!r}")
    lengths = _read_lengths(args.lengths) if args.lengths is not None else None
    X = _read_array(args.data)
    suffix = ".proba.npy" if args.proba else ".labels.npy"
    out = args.out or _default_out(args.data, suffix)
    _check_out(out, inputs=tuple(p for p in (args.model, args.data, args.lengths) if p is not None))
    kw = {"lengths": lengths} if sequences else {}
    result = model.predict_proba(X, **kw) if args.proba else model.predict(X, **kw)
    with open(out, "wb") as f:  # exactly --out: numpy.save(path) would append .npy to any other name
        np.save(f, result)
    if not args.quiet:
        labels = np.argmax(result, axis=1) if args.proba else result
        used, counts = np.unique(labels, return_counts=True)
        what = "responsibilities" if args.proba else "labels"
        n_seqs = "" if not sequences else (" in 1 sequence" if lengths is None else f" in {np.size(lengths)} sequences")
        print(f"{X.shape[0]} rows{n_seqs} -> {len(used)} {_family(model)[0]}; {what} of shape {result.shape} saved to {out}")
        top = np.argsort(-counts, kind="stable")[:10]
        print(f"rows per {_family(model)[0][:-1]}: " + ", ".join(f"{used[i]}: {counts[i]}" for i in top) + (" ..." if len(used) > 10 else ""))
    return EXIT_OK


_COMMANDS = {"fit": _fit, "topics": _topics, "hmm": _hmm, "info": _info, "predict": _predict}


def main(argv=None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    try:
        parser = _build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help and --version
            return int(exc.code or 0)
        return _COMMANDS[args.command](args)
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (OSError, ValueError, ArithmeticError, MemoryError) as exc:  # the bnpcore errors derive from these
        message = str(exc) or type(exc).__name__
        if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
            message = f"{exc.strerror}: {exc.filename!r}"
        print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as exc:
        from bnpcore.exceptions import BnpcoreError

        message = " ".join(str(exc).split())
        if not isinstance(exc, BnpcoreError):  # a bug rather than bad input: still one line, naming the exception
            message = f"unexpected {type(exc).__name__}" + (f": {message}" if message else "")
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
