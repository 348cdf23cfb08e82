"""Plots of fitted bnpcore models: training history, patch components, 2-D clusters, top-L mass.

matplotlib is optional (``pip install matplotlib`` or ``pip install bnpcore[plot]``); it is
imported only when a plotting function is called, so importing this module never needs it.
Every function returns the :class:`matplotlib.figure.Figure` it drew on, and draws on the
figure of ``ax`` when an axes is given.
"""

from __future__ import annotations

import numpy as np

from bnpcore._validation import _is_int, check_param, check_vocabulary
from bnpcore.exceptions import DataError, NotFittedError, ParameterError, ShapeError

__all__ = [
    "MAX_STATE_LABELS",
    "MAX_TOPIC_PANELS",
    "plot_clusters_2d",
    "plot_history",
    "plot_patch_components",
    "plot_segmentation",
    "plot_top_l_mass",
    "plot_topics",
    "plot_transitions",
]

_MIXTURES = ("DPMixture", "FiniteMixture")
_TOPIC_MODELS = ("HDPTopicModel", "FiniteTopicModel")
_HMMS = ("HDPHMM", "FiniteHMM")
_ESTIMATORS = _MIXTURES + _TOPIC_MODELS + _HMMS

#: marker, colour and legend label of each accepted move kind in :func:`plot_history`.
_MOVE_STYLES = {
    "birth": ("^", "tab:green", "birth"),
    "merge": ("v", "tab:purple", "merge"),
    "delete": ("X", "tab:red", "delete"),
    "swap": ("D", "tab:blue", "swap"),
}


def _pyplot():
    """Import and return ``matplotlib.pyplot`` with a clear error when it is missing."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "bnpcore.plotting needs matplotlib: pip install matplotlib "
            "(or pip install 'bnpcore[plot]')"
        ) from exc
    return plt


def _check_model(model, func, attrs, families):
    """Refuse a ``model`` without the fitted attributes ``attrs`` that ``func`` draws:
    :class:`NotFittedError` for an unfitted estimator of one of ``families`` (class names),
    :class:`ParameterError` naming ``model`` and what it must be otherwise."""
    missing = [a for a in attrs if getattr(model, a, None) is None]
    if not missing:
        return
    name = type(model).__name__
    if name in families:
        raise NotFittedError(f"this {name} is not fitted yet; call fit before {func}")
    raise ParameterError(
        f"`model` of {func} must be a fitted {' or '.join(families)} (with {', '.join(attrs)}), got {name}"
    )


def _figure_and_axes(ax, figsize):
    """Return ``(fig, ax)``: a new figure with one axes, or the figure owning ``ax``."""
    plt = _pyplot()
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize)
    else:
        fig = ax.figure
    return fig, ax


def plot_history(model, ax=None, moves=True):
    """Plot the ELBO and the number of clusters after every lap.

    The ELBO is drawn on the left axis and the number of clusters (states of an HMM, topics of
    a topic model; ``n_components``, clusters
    with expected count >= 1) on a twin right axis, both against the lap. Laps whose ELBO is
    NaN are skipped; when no lap has one (truncation-free SVI), the held-out ``"score"`` of
    ``history_`` is drawn instead if it was recorded, otherwise the axis says so. If ``moves`` is true
    and the model has a non-empty ``moves_log_``, every accepted move is marked on the ELBO
    curve at its lap, with one marker per kind (birth, merge, delete).

    Parameters
    ----------
    model : fitted estimator
        Any object with ``history_``, a dict of equal-length 1-D arrays ``"lap"``,
        ``"elbo"``, ``"n_components"`` and ``"seconds"``; optionally ``moves_log_``, a list of
        dicts with keys ``"lap"``, ``"kind"`` (``"birth"``, ``"merge"``, ``"delete"`` or ``"swap"``) and
        ``"accepted"`` (bool).
    ax : matplotlib.axes.Axes, optional
        Axes for the ELBO curve; a twin axes is added to it for the cluster count. By
        default a new figure is created.
    moves : bool, default=True
        Whether to mark accepted moves.

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure drawn on.

    Raises
    ------
    ImportError
        If matplotlib is not installed.
    ValueError
        If ``model`` has no usable ``history_``.
    """
    _check_model(model, "plot_history", ("history_",), _ESTIMATORS)
    history = getattr(model, "history_", None)
    if not history or "lap" not in history or "elbo" not in history:
        raise ValueError("model has no history_ with 'lap' and 'elbo'; fit it first")
    laps = np.asarray(history["lap"], dtype=np.float64)
    elbo = np.asarray(history["elbo"], dtype=np.float64)
    if laps.shape != elbo.shape:
        raise ValueError("history_['lap'] and history_['elbo'] must have the same length")
    fig, ax = _figure_and_axes(ax, (7.0, 4.0))
    # the components' name in the model's family
    name = type(model).__name__
    unit = "states" if name in _HMMS else "topics" if name in _TOPIC_MODELS else "clusters"

    # laps without an ELBO (NaN: truncation-free SVI computes none) are skipped; with none at
    # all, the held-out "score" is drawn instead when it was recorded
    ylabel = "ELBO (nats)"
    if not np.isfinite(elbo).any() and np.isfinite(np.asarray(history.get("score", []), dtype=np.float64)).any():
        elbo = np.asarray(history["score"], dtype=np.float64)
        ylabel = "held-out score"
    finite = np.isfinite(elbo)
    (elbo_line,) = ax.plot(laps[finite], elbo[finite], "-o", color="tab:blue", markersize=3, label=ylabel.split(" (")[0])
    if not finite.any():
        ax.text(0.5, 0.5, "no ELBO recorded", transform=ax.transAxes, ha="center", va="center", color="tab:blue")
        ax.set_yticks([])
    ax.set_xlabel("lap")
    ax.set_ylabel(ylabel, color="tab:blue")
    ax.tick_params(axis="y", labelcolor="tab:blue")
    handles = [elbo_line]

    if "n_components" in history:
        n_components = np.asarray(history["n_components"], dtype=np.float64)
        ax_k = ax.twinx()
        (k_line,) = ax_k.step(
            laps, n_components, where="post", color="tab:orange", label=unit
        )
        ax_k.set_ylabel(f"number of {unit}", color="tab:orange")
        ax_k.tick_params(axis="y", labelcolor="tab:orange")
        ax_k.yaxis.get_major_locator().set_params(integer=True)
        handles.append(k_line)

    moves_log = getattr(model, "moves_log_", None) or []
    if moves and len(moves_log) > 0 and finite.any():
        order = np.argsort(laps[finite], kind="stable")
        for kind, (marker, color, label) in _MOVE_STYLES.items():
            at = np.array(
                [
                    float(m["lap"])
                    for m in moves_log
                    if m.get("kind") == kind and bool(m.get("accepted", False))
                ],
                dtype=np.float64,
            )
            if at.size == 0:
                continue
            y = np.interp(at, laps[finite][order], elbo[finite][order])
            handles.append(
                ax.scatter(
                    at,
                    y,
                    marker=marker,
                    s=60,
                    color=color,
                    edgecolors="black",
                    linewidths=0.5,
                    zorder=5,
                    label=f"{label} ({at.size})",
                )
            )

    # above the axes, so it never hides either curve
    ax.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.01),
        ncol=len(handles),
        fontsize="small",
        frameon=False,
        handletextpad=0.3,
        columnspacing=1.0,
    )
    return fig


def _tile_montage(tiles, pad=1):
    """Arrange ``tiles`` of shape (n_rows, n_cols, p, p) in one image with NaN padding."""
    n_rows, n_cols, p, _ = tiles.shape
    out = np.full((n_rows * (p + pad) + pad, n_cols * (p + pad) + pad), np.nan)
    for r in range(n_rows):
        for c in range(n_cols):
            top, left = pad + r * (p + pad), pad + c * (p + pad)
            out[top : top + p, left : left + p] = tiles[r, c]
    return out


def _tile_centres(n, patch_size, pad=1):
    """Pixel coordinates of the centres of ``n`` consecutive tiles in a montage."""
    return pad + np.arange(n) * (patch_size + pad) + (patch_size - 1) / 2.0


def _rescale_signed(v):
    """Map each row of ``v`` to [0, 1] symmetrically around 0 (0 -> 0.5, +-max|v| -> 1, 0)."""
    scale = np.max(np.abs(v), axis=-1, keepdims=True)
    scale = np.where(scale > 0, scale, 1.0)
    return 0.5 + 0.5 * v / scale


def plot_patch_components(model, n_show=16, patch_size=8, kind="eigen", ax=None):
    """Show the largest clusters of a model fitted to image patches.

    With ``kind="eigen"`` each of the ``n_show`` clusters with the largest weights gets one
    row holding the top 3 eigenvectors of its covariance (largest eigenvalue first), each
    drawn as a ``patch_size × patch_size`` gray image scaled symmetrically around 0 (mid gray
    is 0; the sign is fixed so that the largest-magnitude pixel is bright). Each row is
    labelled with the cluster index and weight. With ``kind="mean"`` the cluster means
    ``means_`` are shown instead, in a near-square grid, each labelled with its weight.

    Parameters
    ----------
    model : fitted estimator
        Object with ``weights_`` (ndarray of shape (n_components,)) and ``covariances_``
        (ndarray of shape (n_components, n_features, n_features)), or ``means_`` (ndarray of
        shape (n_components, n_features)) for ``kind="mean"``; ``n_features`` must equal
        ``patch_size ** 2``.
    n_show : int, default=16
        Number of clusters to show (fewer if the model has fewer).
    patch_size : int, default=8
        Side of the square patches.
    kind : {"eigen", "mean"}, default="eigen"
        What to draw for each cluster.
    ax : matplotlib.axes.Axes, optional
        Axes to draw the image montage on. By default a new figure is created.

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure drawn on.

    Raises
    ------
    ImportError
        If matplotlib is not installed.
    ValueError
        If ``kind`` is unknown, the model lacks the needed attributes, or the number of
        features is not ``patch_size ** 2``.
    ParameterError
        If ``n_show`` or ``patch_size`` is not a positive integer.
    """
    if kind not in ("eigen", "mean"):
        raise ValueError(f"kind must be 'eigen' or 'mean', got {kind!r}")
    check_param("n_show", n_show, kind="int", low=1, low_inclusive=True)
    check_param("patch_size", patch_size, kind="int", low=1, low_inclusive=True)
    _check_model(model, "plot_patch_components", ("weights_",), _MIXTURES)
    weights = np.asarray(model.weights_, dtype=np.float64)
    attr = "covariances_" if kind == "eigen" else "means_"
    params = getattr(model, attr, None)
    if params is None:
        raise ParameterError(f"kind={kind!r} needs the model attribute {attr}, which this {type(model).__name__} does not have")
    params = np.asarray(params, dtype=np.float64)
    if kind == "eigen" and params.ndim != 3:
        raise ParameterError(f"kind='eigen' needs full covariances (obs='gauss'), got covariances_ of shape {params.shape}; use kind='mean'")
    n_features = patch_size * patch_size
    if params.shape[0] != weights.shape[0] or params.shape[1] != n_features:
        raise ValueError(
            f"{attr} has shape {params.shape}; expected ({weights.shape[0]}, {n_features}, ...) "
            f"for patch_size={patch_size}"
        )
    n_show = int(min(n_show, weights.shape[0]))
    if n_show < 1:
        raise ValueError("the model has no cluster to show")
    top = np.argsort(-weights, kind="stable")[:n_show]

    if kind == "eigen":
        _, eigvecs = np.linalg.eigh(params[top])  # ascending eigenvalues, vectors in columns
        n_eig = min(3, n_features)
        vecs = np.moveaxis(eigvecs[:, :, ::-1][:, :, :n_eig], 2, 1)  # (n_show, n_eig, D)
        peak = np.take_along_axis(vecs, np.abs(vecs).argmax(axis=-1)[..., None], axis=-1)
        vecs = vecs * np.where(peak < 0, -1.0, 1.0)
        tiles = _rescale_signed(vecs).reshape(n_show, n_eig, patch_size, patch_size)
        row_labels = [f"#{k}  w={weights[k]:.3f}" for k in top]
        col_labels = [f"eigvec {i + 1}" for i in range(n_eig)]
        figsize = (1.2 * n_eig + 1.8, 0.75 * n_show + 0.8)
    else:
        n_cols = int(np.ceil(np.sqrt(n_show)))
        n_rows = int(np.ceil(n_show / n_cols))
        means = np.full((n_rows * n_cols, n_features), np.nan)
        means[:n_show] = params[top]
        lo, hi = np.nanmin(means), np.nanmax(means)
        means = (means - lo) / (hi - lo) if hi > lo else np.full_like(means, 0.5)
        tiles = means.reshape(n_rows, n_cols, patch_size, patch_size)
        figsize = (1.3 * n_cols + 0.5, 1.3 * n_rows + 0.8)

    fig, ax = _figure_and_axes(ax, figsize)
    # the mean grid leaves room under each tile for its weight label
    pad = 1 if kind == "eigen" else max(2, (patch_size + 1) // 2)
    montage = _tile_montage(tiles, pad=pad)
    # pale blue gaps so that white and black tiles both stand out
    cmap = _pyplot().get_cmap("gray").with_extremes(bad="#dbe6f1")
    ax.imshow(montage, cmap=cmap, vmin=0.0, vmax=1.0, interpolation="nearest")
    step = patch_size + pad
    if kind == "eigen":
        ax.set_yticks(_tile_centres(n_show, patch_size))
        ax.set_yticklabels(row_labels, fontsize="small")
        ax.set_xticks(_tile_centres(tiles.shape[1], patch_size))
        ax.set_xticklabels(col_labels, fontsize="small")
        ax.xaxis.tick_top()
        ax.set_title(
            f"top {n_show} clusters by weight: covariance eigenvectors",
            fontsize="medium",
        )
    else:
        ax.set_xticks([])
        ax.set_yticks([])
        for i, k in enumerate(top):
            r, c = divmod(i, tiles.shape[1])
            ax.text(
                pad + c * step + (patch_size - 1) / 2.0,
                pad + r * step + patch_size - 0.5 + 0.1 * pad,
                f"w={weights[k]:.3f}",
                ha="center",
                va="top",
                fontsize="x-small",
                color="black",
            )
        ax.set_title(f"top {n_show} cluster means by weight", fontsize="medium")
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    return fig


def plot_clusters_2d(X, labels, ax=None):
    """Scatter plot of the first two columns of ``X`` coloured by cluster label.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Data; only the first two features are drawn (``n_features >= 2``).
    labels : array-like of shape (n_samples,)
        Cluster label of each row (e.g. ``model.predict(X)``).
    ax : matplotlib.axes.Axes, optional
        Axes to draw on. By default a new figure is created.

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure drawn on.

    Raises
    ------
    ImportError
        If matplotlib is not installed.
    ShapeError
        If ``X`` is not 2-D with at least two columns or ``labels`` has the wrong length (a
        ``ValueError``).

    Notes
    -----
    Up to 20 clusters get the distinct colours of ``tab20``; more get evenly spaced colours of
    ``turbo`` (neighbouring labels then have close colours).
    """
    X = np.asarray(X, dtype=np.float64)
    labels = np.asarray(labels)
    if X.ndim != 2 or X.shape[1] < 2:
        raise ShapeError(f"`X` must have shape (n_samples, >=2), got {X.shape}")
    if labels.shape != (X.shape[0],):
        raise ShapeError(f"`labels` must have shape ({X.shape[0]},), got {labels.shape}")
    fig, ax = _figure_and_axes(ax, (5.0, 5.0))
    _, codes = np.unique(labels, return_inverse=True)
    n_colours = int(codes.max()) + 1 if codes.size else 1
    # tab20 repeats its colours beyond 20 clusters (two clusters, one colour): a continuous map then
    cmap, top = ("tab20", 19) if n_colours <= 20 else ("turbo", n_colours - 1)
    ax.scatter(
        X[:, 0],
        X[:, 1],
        c=codes,
        cmap=cmap,
        vmin=0,
        vmax=top,
        s=4,
        alpha=0.7,
        linewidths=0,
    )
    ax.set_xlabel("feature 0")
    ax.set_ylabel("feature 1")
    ax.set_title(f"{np.unique(codes).size} clusters")
    return fig


def plot_top_l_mass(model, X, top_l=(1, 2, 4, 8, 16), ax=None):
    r"""How much of the dense responsibilities an L-sparse step keeps, per sparsity level.

    For each L in ``top_l``, draws the cumulative distribution over the rows of ``X`` of
    :math:`1-m_n(L)`, the total-variation distance between the L-sparse and the dense
    responsibilities of row n at the fitted global parameters (``model.top_l_mass``). A curve
    that reaches 1 at the far left means that level loses (almost) nothing. The legend gives
    the mean :math:`-\log m_n(L)`, the per-row ELBO an L-sparse step gives up at these global
    parameters. Distances below 1e-16 (round-off) are drawn at 1e-16.

    Parameters
    ----------
    model : fitted estimator
        A fitted :class:`~bnpcore.DPMixture` or :class:`~bnpcore.FiniteMixture`.
    X : array-like of shape (n_samples, n_features)
        Rows to evaluate (e.g. a few thousand training rows).
    top_l : sequence of int, default=(1, 2, 4, 8, 16)
        Sparsity levels.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on. By default a new figure is created.

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure drawn on.

    Raises
    ------
    ImportError
        If matplotlib is not installed.
    """
    if not hasattr(model, "top_l_mass"):
        _check_model(model, "plot_top_l_mass", ("top_l_mass",), _MIXTURES)
    levels = np.atleast_1d(np.asarray(top_l))
    mass = model.top_l_mass(X, levels)
    fig, ax = _figure_and_axes(ax, (6.0, 4.0))
    floor = 1e-16
    n = mass.shape[0]
    cdf = np.arange(1, n + 1) / n
    for j, L in enumerate(levels):
        dist = np.sort(np.maximum(1.0 - mass[:, j], floor))
        cost = float(-np.mean(np.log(mass[:, j]))) + 0.0  # + 0.0: no "-0" for L >= K
        ax.step(dist, cdf, where="post", label=f"L={int(L)}: mean −log m = {cost:.2g} nats")
    ax.set_xscale("log")
    ax.set_xlim(floor / 2, 1.0)
    ax.set_ylim(0.0, 1.01)
    ax.set_xlabel("1 − m (total-variation distance, L-sparse vs dense)")
    ax.set_ylabel("fraction of rows")
    ax.set_title(f"mass kept by the top L of {model.summaries_.N.shape[0]} clusters ({n} rows)")
    ax.legend(fontsize="small", loc="lower right")
    return fig


#: most topic panels :func:`plot_topics` draws when ``n_show`` is None (a figure of hundreds
#: of panels is unreadable and very large; pass ``n_show`` for more)
MAX_TOPIC_PANELS = 50


def _note_capped(fig, total: int) -> None:
    if total:
        fig.suptitle(f"the {MAX_TOPIC_PANELS} largest of {total} topics (n_show sets how many)", fontsize=9)


def plot_topics(model, n_words=10, vocabulary=None, image_shape=None, n_show=None, min_count=1.0):
    """Draw the fitted topics of a topic model.

    For an image-like vocabulary (``image_shape`` given, or a square vocabulary such as the
    30 × 30 bars of :func:`bnpcore.datasets.make_bars` when no ``vocabulary`` is given), every
    topic's word probabilities are drawn as an image. Otherwise each topic is a panel listing
    its ``n_words`` most probable words (``vocabulary`` strings, or word ids) with horizontal
    bars of their probabilities.

    Parameters
    ----------
    model : fitted HDPTopicModel or FiniteTopicModel
        Anything with ``topics_`` (K × n_vocab, rows sum to 1) and optionally ``counts_``.
    n_words : int, default=10
        Words listed per topic (word panels).
    vocabulary : sequence of str, mapping or None
        The words of the vocabulary: in column order, or an id-to-word or word-to-id mapping
        (as for :meth:`bnpcore.HDPTopicModel.top_words`).
    image_shape : pair of int or None
        (rows, columns) to draw each topic as an image; None: square vocabularies are drawn as
        images unless a ``vocabulary`` is given.
    n_show : int or None
        Draw at most this many topics (the largest first); None: every topic with an
        expected count of at least ``min_count``, but at most :data:`MAX_TOPIC_PANELS` (the
        largest; the figure's title then says how many there are).
    min_count : float, default=1.0

    Returns
    -------
    fig : matplotlib.figure.Figure

    Raises
    ------
    ParameterError
        If ``n_words`` or ``n_show`` is not a positive integer (``n_show`` may be None),
        ``min_count`` is not a finite number, ``vocabulary`` does not give one word per id, or
        ``image_shape`` is not a pair of positive integers holding ``n_vocab`` words.
    """
    check_param("n_words", n_words, kind="int", low=1, low_inclusive=True)
    check_param("n_show", n_show, kind="int", low=1, low_inclusive=True, allow_none=True)
    check_param("min_count", min_count, kind="real")
    _check_model(model, "plot_topics", ("topics_",), _TOPIC_MODELS)
    topics = np.asarray(model.topics_)
    if topics.ndim != 2:
        raise ValueError("model has no topics_; fit it first")
    counts = np.asarray(getattr(model, "counts_", np.ones(topics.shape[0])), dtype=np.float64)
    order = np.argsort(-counts, kind="stable")
    order = order[counts[order] >= min_count] if n_show is None else order[:n_show]
    if order.size == 0:
        order = np.argsort(-counts, kind="stable")[:1]
    capped = order.size if n_show is None and order.size > MAX_TOPIC_PANELS else 0
    order = order[:MAX_TOPIC_PANELS] if capped else order
    V = topics.shape[1]
    if vocabulary is not None:
        vocabulary = check_vocabulary(vocabulary, V)
    if image_shape is not None:
        shape = tuple(image_shape) if isinstance(image_shape, (tuple, list, np.ndarray)) else None
        if shape is None or len(shape) != 2 or not all(_is_int(x) and x > 0 for x in shape) or shape[0] * shape[1] != V:
            raise ParameterError(f"`image_shape` must be a pair of positive integers whose product is the {V} words, got {image_shape!r}")
        image_shape = (int(shape[0]), int(shape[1]))
    side = int(round(np.sqrt(V)))
    if image_shape is None and vocabulary is None and side * side == V:
        image_shape = (side, side)
    plt = _pyplot()
    n = order.size
    cols = min(n, 5)
    rows = int(np.ceil(n / cols))
    if image_shape is not None:
        fig, axes = plt.subplots(rows, cols, figsize=(1.8 * cols, 1.9 * rows), squeeze=False)
        for i, ax in enumerate(axes.ravel()):
            ax.set_xticks([])
            ax.set_yticks([])
            if i >= n:
                ax.axis("off")
                continue
            k = order[i]
            ax.imshow(topics[k].reshape(image_shape), cmap="gray_r", interpolation="nearest")
            ax.set_title(f"topic {k} (N={counts[k]:.0f})", fontsize=7)
        _note_capped(fig, capped)
        fig.tight_layout()
        return fig
    fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols, 0.28 * n_words * rows + 0.6), squeeze=False)
    for i, ax in enumerate(axes.ravel()):
        if i >= n:
            ax.axis("off")
            continue
        k = order[i]
        idx = np.argsort(-topics[k], kind="stable")[: int(n_words)]
        labels = [str(vocabulary[j]) if vocabulary is not None else str(j) for j in idx]
        ax.barh(np.arange(idx.size)[::-1], topics[k, idx], color="tab:blue")
        ax.set_yticks(np.arange(idx.size)[::-1])
        ax.set_yticklabels(labels, fontsize=7)
        ax.tick_params(axis="x", labelsize=6)
        ax.set_title(f"topic {k} (N={counts[k]:.0f})", fontsize=8)
    _note_capped(fig, capped)
    fig.tight_layout()
    return fig


def plot_segmentation(model, X, lengths=None, n_show=4, max_steps=None, true_states=None):
    """State sequences of a fitted HMM under the data: for each of the first ``n_show``
    sequences, the observations (one line per feature, up to 4) with a colour strip of the
    Viterbi states below them (and the true states, if given, as a second strip).

    Parameters
    ----------
    model : HDPHMM or FiniteHMM
    X, lengths : the sequences (hmmlearn convention, or a list of 2-D arrays with ``lengths=None``)
    n_show : int
        Number of sequences drawn (at most; a positive integer).
    max_steps : int or None
        Draw at most this many time steps of each sequence (a positive integer).
    true_states : array-like of int or None
        True state of every row of ``X`` (e.g. from ``make_sticky_hmm``), drawn as a second strip;
        the fitted states are then coloured like the true states they match best.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ParameterError
        If ``n_show`` or ``max_steps`` is not a positive integer (``max_steps`` may be None).
    DataError
        If ``true_states`` is not one non-negative integer per row of ``X``.
    """
    check_param("n_show", n_show, kind="int", low=1, low_inclusive=True)
    check_param("max_steps", max_steps, kind="int", low=1, low_inclusive=True, allow_none=True)
    _check_model(model, "plot_segmentation", ("transmat_",), _HMMS)
    plt = _pyplot()
    from bnpcore._validation import is_sequence_list

    if is_sequence_list(X):
        lengths = [len(x) for x in X]
        X = np.concatenate([np.asarray(x, dtype=np.float64) for x in X])
    X = np.asarray(X, dtype=np.float64)
    lengths = np.asarray([X.shape[0]] if lengths is None else lengths, dtype=np.int64)
    states = model.predict(X, lengths)
    if true_states is not None:
        # colour fitted states like the true states they overlap most (Hungarian matching)
        from scipy.optimize import linear_sum_assignment

        t = np.asarray(true_states)
        if t.shape != states.shape or not (np.issubdtype(t.dtype, np.integer) and (t.size == 0 or t.min() >= 0)):
            raise DataError(f"`true_states` must hold one non-negative integer state per row of `X` ({states.shape[0]}), got shape {t.shape}, dtype {t.dtype}")
        t = t.astype(np.int64)
        C = np.zeros((int(states.max()) + 1, int(t.max()) + 1))
        np.add.at(C, (states, t), 1.0)
        r, c = linear_sum_assignment(-C)
        relabel = np.arange(C.shape[0]) + C.shape[1]  # unmatched fitted states get new colours
        relabel[r] = c
        states = relabel[states]
    starts = np.concatenate([[0], np.cumsum(lengths)])
    n = int(min(n_show, lengths.size))
    K = int(model.transmat_.shape[0])
    cmap = plt.get_cmap("tab20" if K > 10 else "tab10")
    rows = 3 if true_states is not None else 2
    fig, axes = plt.subplots(n * rows, 1, figsize=(10, 1.1 * n * rows + 0.5), squeeze=False,
                             gridspec_kw={"height_ratios": ([3, 0.5, 0.5] if rows == 3 else [3, 0.5]) * n})
    for s in range(n):
        a, b = int(starts[s]), int(starts[s + 1])
        if max_steps is not None:
            b = min(b, a + int(max_steps))
        ax = axes[s * rows, 0]
        for j in range(min(X.shape[1], 4)):
            ax.plot(np.arange(b - a), X[a:b, j], lw=0.8)
        ax.set_xlim(0, b - a)
        ax.set_ylabel(f"seq {s}")
        ax.set_xticks([])
        strips = [("fitted", states[a:b])]
        if true_states is not None:
            strips.append(("true", np.asarray(true_states)[a:b]))
        for r, (label, z) in enumerate(strips, start=1):
            sax = axes[s * rows + r, 0]
            sax.imshow(np.asarray(z)[None, :] % cmap.N, aspect="auto", cmap=cmap, vmin=0, vmax=cmap.N - 1, interpolation="nearest")
            sax.set_yticks([0])
            sax.set_yticklabels([label])
            sax.set_xticks([])
    axes[-1, 0].set_xlabel("time step")
    fig.suptitle(f"{type(model).__name__}: {model.n_components_} states (Viterbi)")
    fig.tight_layout()
    return fig


#: most state labels per axis of :func:`plot_transitions` (more overlap)
MAX_STATE_LABELS = 30


def plot_transitions(model, ax=None, annotate=None):
    """The expected transition matrix ``transmat_`` of a fitted HMM as a heat map (rows: from,
    columns: to), with the start distribution as an extra top row.

    Parameters
    ----------
    model : HDPHMM or FiniteHMM
    ax : matplotlib axes or None
    annotate : bool or None
        Write the probabilities in the cells (default: when K ≤ 12).

    With more than :data:`MAX_STATE_LABELS` states, every ``ceil(K / MAX_STATE_LABELS)``-th
    state is labelled.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ParameterError
        If ``annotate`` is neither a bool nor None.
    """
    check_param("annotate", annotate, kind="bool", allow_none=True)
    _check_model(model, "plot_transitions", ("startprob_", "transmat_"), _HMMS)
    fig, ax = _figure_and_axes(ax, (5.5, 5))
    T = np.vstack([model.startprob_[None, :], model.transmat_])
    K = T.shape[1]
    im = ax.imshow(T, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    # a label for every state up to MAX_STATE_LABELS states, else for every step-th one (with
    # "start" kept): hundreds of labels would overlap into a black band
    step = max(1, int(np.ceil(K / MAX_STATE_LABELS)))
    ax.set_xticks(range(0, K, step))
    ax.set_yticks([0] + [k + 1 for k in range(0, K, step)])
    ax.set_yticklabels(["start"] + [str(k) for k in range(0, K, step)])
    ax.set_xlabel("to state")
    ax.set_ylabel("from state")
    ax.axhline(0.5, color="white", lw=1.5)
    if annotate if annotate is not None else K <= 12:
        for i in range(K + 1):
            for j in range(K):
                ax.text(j, i, f"{T[i, j]:.2f}", ha="center", va="center", fontsize=7, color="white" if T[i, j] < 0.6 else "black")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    ax.set_title("expected transition probabilities")
    return fig
