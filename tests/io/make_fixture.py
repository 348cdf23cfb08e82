"""Write the saved-model fixtures of ``test_format_fixtures.py`` into ``tests/io/data/``.

The fixtures are model files (``*_v1``: format version 1, ``*_v2``: version 2) written by the
bnpcore of the commit that added them, with the data they were fitted to and the predictions that bnpcore made.
They are regression fixtures: a later bnpcore must still load them and predict the same (or
refuse them with a clear format-version error once the format version is bumped). Do not
regenerate them to make a failing test pass; add a fixture for a new format version instead:
``python tests/io/make_fixture.py <version-tag>``.
"""

import pathlib
import sys
import warnings

import bnpcore
import numpy as np
from bnpcore import DPMixture, FiniteMixture
from bnpcore.exceptions import ConvergenceWarning

HERE = pathlib.Path(__file__).with_name("data")


def cases():
    """(file stem, estimator, data) of every fixture: small, but with memos, moves and priors."""
    rng = np.random.default_rng(7)
    z = rng.integers(0, 3, size=150)
    gauss = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])[z] + rng.standard_normal((150, 2))
    topics = rng.dirichlet(np.full(8, 0.3), size=3)
    counts = np.array([rng.multinomial(15, topics[c]) for c in z[:90]], dtype=float)
    return [
        ("dpmixture_gauss_memoized", DPMixture(obs="gauss", n_components=6, algorithm="memoized", n_batches=3,
                                                max_laps=4, random_state=0), gauss),
        ("finitemixture_mult_full", FiniteMixture(obs="mult", n_components=3, max_laps=5, random_state=1), counts),
    ]


def write(tag: str) -> None:
    HERE.mkdir(exist_ok=True)
    for stem, est, X in cases():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est.fit(X)
        est.save(HERE / f"{stem}_{tag}.npz")
        np.savez(
            HERE / f"{stem}_{tag}_expected.npz",
            X=X,
            predict=est.predict(X),
            predict_proba=est.predict_proba(X),
            score_samples=est.score_samples(X),
            weights=est.weights_,
            elbo=np.array(est.elbo_),
            n_components=np.array(est.n_components_),
            lap=np.array(est.state_.lap),
        )
        print(f"wrote {stem}_{tag} with bnpcore {bnpcore.__version__}")


if __name__ == "__main__":
    write(sys.argv[1] if len(sys.argv) > 1 else "v1")
