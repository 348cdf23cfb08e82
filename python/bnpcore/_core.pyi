"""Type stubs of the Rust extension ``bnpcore._core`` (private: use the ``bnpcore`` API)."""

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import numpy.typing as npt

__version__: str

F64 = npt.NDArray[np.float64]

class ObsModel:
    def __new__(cls, kind: str, prior: dict[str, Any]) -> ObsModel: ...
    @property
    def kind(self) -> str: ...
    @property
    def n_features(self) -> int: ...
    @property
    def stat_dim(self) -> int: ...
    @property
    def c_prior(self) -> float: ...
    def check_data(self, x: F64, name: str = "X") -> None: ...
    def h_sum(self, x: F64) -> float: ...
    def summarize(self, x: F64, resp: F64, n_threads: Optional[int] = None) -> tuple[F64, F64]: ...
    def e_log_lik(self, x: F64, n_post: F64, s_post: F64, n_threads: Optional[int] = None) -> F64: ...
    def log_density(self, x: F64, n_post: F64, s_post: F64, n_threads: Optional[int] = None) -> F64: ...
    def elbo_data(self, n: F64, s: F64) -> float: ...
    def elbo_data_per_cluster(self, n: F64, s: F64) -> F64: ...
    def e_log_lik_sum_from_stats(self, n_post: F64, s_post: F64, n: F64, s: F64) -> F64: ...
    def point_estimates(self, n: F64, s: F64) -> dict[str, F64]: ...
    def smoothed_divergence(self, x: F64, i: int, n_threads: Optional[int] = None) -> F64: ...
    def kmeanspp(self, x: F64, uniforms: F64, n_threads: Optional[int] = None) -> list[int]: ...

def local_step(
    obs: ObsModel,
    x: F64,
    n_post: F64,
    s_post: F64,
    e_log_pi: F64,
    *,
    weights: Optional[F64] = None,
    merge_pairs: Optional[Sequence[tuple[int, int]]] = None,
    proposals: Optional[list[dict[str, Any]]] = None,
    collect_col: Optional[int] = None,
    cooccur_col: Optional[int] = None,
    return_resp: bool = False,
    top_l: Optional[int] = None,
    n_threads: Optional[int] = None,
) -> dict[str, Any]: ...
def fit_fresh_clusters(
    obs: ObsModel,
    x: F64,
    w: F64,
    alloc: str,
    gamma: float,
    uniforms: F64,
    n_fresh: int,
    n_seeds: int,
    iters: int,
    kmeans_iters: int,
    *,
    n_threads: Optional[int] = None,
) -> Optional[tuple[F64, F64, float]]: ...
def dp_e_log_pi(n: F64, gamma: float) -> F64: ...
def dp_e_pi(n: F64, gamma: float) -> F64: ...
def dp_elbo(n: F64, gamma: float) -> float: ...
def finite_e_log_pi(n: F64, gamma: float) -> F64: ...
def finite_theta(n: F64, gamma: float) -> F64: ...
def finite_elbo(n: F64, gamma: float) -> float: ...
def digamma(x: F64) -> F64: ...
def default_num_threads() -> int: ...
def _after_fork_in_child() -> None: ...

# --- hidden Markov models (forward-backward, Viterbi, HDP-HMM / finite-HMM allocation math) ---
I64 = npt.NDArray[np.int64]

def forward_backward(
    log_lik: F64,
    seq_range: I64,
    log_start: F64,
    log_trans: F64,
    *,
    return_resp: bool = False,
    return_seq_counts: bool = False,
    merge_pairs: Optional[Sequence[tuple[int, int]]] = None,
    log_space: bool = False,
    n_threads: Optional[int] = None,
) -> dict[str, Any]: ...
def viterbi(log_lik: F64, seq_range: I64, log_start: F64, log_trans: F64, *, n_threads: Optional[int] = None) -> tuple[I64, F64]: ...
def hmm_local_step(
    obs: ObsModel,
    x: F64,
    n_post: F64,
    s_post: F64,
    seq_range: I64,
    log_start: F64,
    log_trans: F64,
    *,
    return_resp: bool = False,
    return_seq_counts: bool = False,
    merge_pairs: Optional[Sequence[tuple[int, int]]] = None,
    n_threads: Optional[int] = None,
) -> dict[str, Any]: ...
def hmm_global_step(
    start_count: F64,
    trans_count: F64,
    u: F64,
    omega: F64,
    *,
    alpha: float,
    start_alpha: float,
    kappa: float,
    gamma: float,
    n_iters: int = 1,
    omega_update: str = "optimize",
) -> dict[str, F64]: ...
def hmm_theta(start_count: F64, trans_count: F64, u: F64, *, alpha: float, start_alpha: float, kappa: float, gamma: float) -> F64: ...
def hmm_e_log_pi(theta: F64) -> F64: ...
def hmm_init_u(n_components: int) -> F64: ...
def hmm_top_objective(
    u: F64, omega: F64, e_log_pi: F64, *, alpha: float, start_alpha: float, kappa: float, gamma: float
) -> tuple[float, F64, F64]: ...
def hmm_optimize_sticks(
    u: F64,
    omega: F64,
    e_log_pi: F64,
    *,
    alpha: float,
    start_alpha: float,
    kappa: float,
    gamma: float,
    omega_update: str = "optimize",
) -> tuple[F64, F64]: ...
def hmm_elbo_alloc(
    start_count: F64,
    trans_count: F64,
    h_start: F64,
    h_trans: F64,
    theta: F64,
    u: F64,
    omega: F64,
    *,
    alpha: float,
    start_alpha: float,
    kappa: float,
    gamma: float,
) -> dict[str, float]: ...
def finite_hmm_theta(start_count: F64, trans_count: F64, *, alpha: float, start_alpha: float, kappa: float) -> F64: ...
def finite_hmm_elbo_alloc(
    start_count: F64, trans_count: F64, h_start: F64, h_trans: F64, theta: F64, *, alpha: float, start_alpha: float, kappa: float
) -> dict[str, float]: ...
