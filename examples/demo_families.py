"""The two other model families in a few seconds each, both starting from ONE component:

* an HDP topic model on the toy bars corpus (``bnpcore.datasets.make_bars``: 10 bar topics on
  a 30 × 30 vocabulary), grown by births and cleaned by merges/deletes to the 10 bars;
* a sticky HDP-HMM on the toy of Hughes' thesis §6.6.1 (``make_sticky_hmm``: 32 sequences ×
  1,000 steps, 8 states), grown by births to the 8 states.

Prints what was found and saves ``demo_output/topics_bars.png``,
``demo_output/hmm_segmentation.png`` and ``demo_output/hmm_transitions.png``.
"""

from __future__ import annotations

import os
import time
import warnings

import matplotlib

matplotlib.use("Agg")

import bnpcore
from bnpcore.plotting import plot_segmentation, plot_topics, plot_transitions
from sklearn.metrics import adjusted_rand_score


def main():
    os.makedirs("demo_output", exist_ok=True)
    warnings.simplefilter("ignore", bnpcore.ConvergenceWarning)

    X, _ = bnpcore.datasets.make_bars(n_docs=1000, random_state=0)[:2]
    t = time.perf_counter()
    topics = bnpcore.HDPTopicModel(n_components=1, random_state=0).fit(X)
    print(f"HDP topic model: 1 -> {topics.n_components_} topics in {time.perf_counter() - t:.1f} s "
          f"({topics.n_iter_} laps, document-completion perplexity on the corpus {topics.perplexity(X):.1f})")
    plot_topics(topics, image_shape=(30, 30)).savefig("demo_output/topics_bars.png", dpi=80)

    S, lengths, z = bnpcore.datasets.make_sticky_hmm(random_state=0)
    t = time.perf_counter()
    hmm = bnpcore.HDPHMM(n_components=1, kappa=50.0, n_batches=4, random_state=0).fit(S, lengths)
    ari = adjusted_rand_score(z, hmm.predict(S, lengths))
    print(f"sticky HDP-HMM: 1 -> {hmm.n_components_} states in {time.perf_counter() - t:.1f} s "
          f"({hmm.n_iter_} laps, ARI {ari:.3f} against the true states)")
    plot_segmentation(hmm, S, lengths, n_show=3, true_states=z).savefig("demo_output/hmm_segmentation.png", dpi=80)
    plot_transitions(hmm).savefig("demo_output/hmm_transitions.png", dpi=80)
    print("figures in demo_output/")


if __name__ == "__main__":
    main()
