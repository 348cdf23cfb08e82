"""Type stubs of the Rust extension ``bnpcore._core`` (private: use the ``bnpcore`` API)."""

from collections.abc import Sequence
from typing import Any, Optional, Union, final

import numpy as np
import numpy.typing as npt

__version__: str
#: a document uses topic k when N_dk exceeds this (default ``usage_threshold`` of doc_topic_step)
DOC_USAGE_THRESHOLD: float
#: most tokens one batch of truncation-free SVI may hold (the sampler keeps a topic per token)
TF_MAX_BATCH_TOKENS: int

_F64 = npt.NDArray[np.float64]

@final
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
    def check_data(self, x: _F64, name: str = "X") -> None: ...
    def h_sum(self, x: _F64) -> float: ...
    def summarize(self, x: _F64, resp: _F64, n_threads: Optional[int] = None) -> tuple[_F64, _F64]: ...
    def e_log_lik(self, x: _F64, n_post: _F64, s_post: _F64, n_threads: Optional[int] = None) -> _F64: ...
    def log_density(
        self, x: Union[_F64, tuple[npt.NDArray[Any], npt.NDArray[Any], _F64, int]], n_post: _F64, s_post: _F64, n_threads: Optional[int] = None
    ) -> _F64: ...
    def elbo_data(self, n: _F64, s: _F64) -> float: ...
    def elbo_data_per_cluster(self, n: _F64, s: _F64) -> _F64: ...
    def clear_term_cache(self) -> None: ...
    def elbo_data_per_pair(self, n: _F64, s: _F64, a: _I64, b: _I64) -> _F64: ...
    def e_log_lik_sum_from_stats(self, n_post: _F64, s_post: _F64, n: _F64, s: _F64) -> _F64: ...
    def point_estimates(self, n: _F64, s: _F64) -> dict[str, _F64]: ...
    def smoothed_divergence(self, x: _F64, i: int, n_threads: Optional[int] = None) -> _F64: ...
    def kmeanspp(self, x: _F64, uniforms: _F64, n_threads: Optional[int] = None) -> list[int]: ...

@final
class Alloc:
    def __new__(cls, kind: str, gamma: float) -> Alloc: ...
    @staticmethod
    def fixed(log_weights: _F64) -> Alloc: ...
    @property
    def kind(self) -> str: ...
    @property
    def gamma(self) -> Optional[float]: ...
    def e_log_pi(self, n: _F64) -> _F64: ...
    def e_pi(self, n: _F64) -> _F64: ...
    def elbo(self, n: _F64) -> float: ...
    def merge_delta(self, n: _F64) -> _F64: ...

def local_step(
    obs: ObsModel,
    alloc: Alloc,
    x: Union[_F64, tuple[npt.NDArray[Any], npt.NDArray[Any], _F64, int]],
    n_post: _F64,
    s_post: _F64,
    *,
    weights: Optional[_F64] = None,
    merge_pairs: Optional[Sequence[tuple[int, int]]] = None,
    proposals: Optional[list[dict[str, Any]]] = None,
    collect_cols: Optional[Sequence[int]] = None,
    cooccur_col: Optional[int] = None,
    cooccur_pairs: bool = False,
    return_resp: bool = False,
    top_l: Optional[int] = None,
    n_threads: Optional[int] = None,
    prepared: Optional[PreparedGlobals] = None,
) -> dict[str, Any]: ...

@final
class PreparedGlobals:
    """Global parameters prepared for local steps (:func:`prepare_local`)."""

def prepare_local(obs: ObsModel, alloc: Alloc, n_post: _F64, s_post: _F64) -> PreparedGlobals: ...
def fit_fresh_clusters(
    obs: ObsModel,
    x: _F64,
    w: _F64,
    alloc: Alloc,
    uniforms: _F64,
    n_fresh: int,
    n_seeds: int,
    iters: int,
    kmeans_iters: int,
    *,
    seed_rows: int = 1,
    abandon_loss: Optional[float] = None,
    abandon_after: int = 0,
    n_threads: Optional[int] = None,
) -> Optional[tuple[_F64, _F64, float]]: ...
def digamma(x: _F64) -> _F64: ...
def default_num_threads() -> int: ...
def max_num_threads() -> int: ...
def _after_fork_in_child() -> None: ...
def _set_caller_threads(n: int) -> int: ...

# --- topic-model kernels (rust/bnpcore-py/src/topic.rs) ---
def doc_topic_step(
    indptr: Any,
    indices: Any,
    data: _F64,
    exp_elog_phi: _F64,
    alpha_beta: _F64,
    *,
    alpha_beta_rem: Optional[float] = None,
    max_iter: int = 100,
    tol: float = 0.05,
    restarts: bool = True,
    restart_mask: Optional[Any] = None,
    cold_mask: Optional[Any] = None,
    restart_max_trials: int = 25,
    restart_iters: int = 2,
    restart_min_mass: float = 0.1,
    top_l: Optional[int] = None,
    sparse_eps: float = 1e-3,
    merge_pairs: Optional[Sequence[tuple[int, int]]] = None,
    usage_threshold: Optional[float] = None,
    return_doc_topic: bool = False,
    init_doc_topic: Optional[_F64] = None,
    n_threads: Optional[int] = None,
) -> dict[str, Any]: ...
def topic_word_table(lam: _F64, *, prior: Optional[_F64] = None, n_threads: Optional[int] = None) -> _F64: ...
def hdp_beta_from_rho(rho: _F64) -> tuple[_F64, float]: ...
def hdp_rho_from_beta(beta: _F64) -> _F64: ...
def hdp_omega(n_docs: float, n_components: int, gamma: float) -> _F64: ...
def hdp_rho_init(n_docs: float, n_components: int, gamma: float) -> _F64: ...
def hdp_rho_objective(
    rho: _F64, p: _F64, p_rem: float, n_docs: float, alpha: float, gamma: float, omega: Optional[_F64] = None
) -> tuple[float, _F64]: ...
def hdp_optimize_rho(
    rho_init: _F64,
    p: _F64,
    p_rem: float,
    n_docs: float,
    alpha: float,
    gamma: float,
    omega: Optional[_F64] = None,
    max_iter: int = 500,
) -> dict[str, Any]: ...
def hdp_elbo_top(rho: _F64, omega: _F64, n_docs: float, alpha: float, gamma: float) -> float: ...
def hdp_elbo_doc(q0: float, q: _F64, q_rem: float, p: _F64, p_rem: float, alpha: float, beta: _F64, beta_rem: float) -> float: ...
def lda_elbo_doc(n_docs: float, alpha: float, q0: float, q: _F64, p: _F64) -> float: ...
# --- hidden Markov models (forward-backward, Viterbi, HDP-HMM / finite-HMM allocation math) ---
_I64 = npt.NDArray[np.int64]

def forward_backward(
    log_lik: _F64,
    seq_range: _I64,
    log_start: _F64,
    log_trans: _F64,
    *,
    return_resp: bool = False,
    return_seq_counts: bool = False,
    merge_pairs: Optional[Sequence[tuple[int, int]]] = None,
    log_space: bool = False,
    n_threads: Optional[int] = None,
) -> dict[str, Any]: ...
def viterbi(log_lik: _F64, seq_range: _I64, log_start: _F64, log_trans: _F64, *, n_threads: Optional[int] = None) -> tuple[_I64, _F64]: ...
def hmm_local_step(
    obs: ObsModel,
    x: _F64,
    n_post: _F64,
    s_post: _F64,
    seq_range: _I64,
    log_start: _F64,
    log_trans: _F64,
    *,
    return_resp: bool = False,
    return_seq_counts: bool = False,
    merge_pairs: Optional[Sequence[tuple[int, int]]] = None,
    n_threads: Optional[int] = None,
) -> dict[str, Any]: ...
def hmm_global_step(
    start_count: _F64,
    trans_count: _F64,
    u: _F64,
    omega: _F64,
    *,
    alpha: float,
    start_alpha: float,
    kappa: float,
    gamma: float,
    n_iters: int = 1,
    profile: bool = False,
    omega_update: str = "optimize",
) -> dict[str, _F64]: ...
def hmm_theta(start_count: _F64, trans_count: _F64, u: _F64, *, alpha: float, start_alpha: float, kappa: float, gamma: float) -> _F64: ...
def hmm_e_log_pi(theta: _F64) -> _F64: ...
def hmm_init_u(n_components: int) -> _F64: ...
def hmm_top_objective(
    u: _F64, omega: _F64, e_log_pi: _F64, *, alpha: float, start_alpha: float, kappa: float, gamma: float
) -> tuple[float, _F64, _F64]: ...
def hmm_optimize_sticks(
    u: _F64,
    omega: _F64,
    e_log_pi: _F64,
    *,
    alpha: float,
    start_alpha: float,
    kappa: float,
    gamma: float,
    omega_update: str = "optimize",
) -> tuple[_F64, _F64]: ...
def hmm_elbo_alloc(
    start_count: _F64,
    trans_count: _F64,
    h_start: _F64,
    h_trans: _F64,
    theta: _F64,
    u: _F64,
    omega: _F64,
    *,
    alpha: float,
    start_alpha: float,
    kappa: float,
    gamma: float,
) -> dict[str, float]: ...
def finite_hmm_theta(start_count: _F64, trans_count: _F64, *, alpha: float, start_alpha: float, kappa: float) -> _F64: ...
def finite_hmm_elbo_alloc(
    start_count: _F64, trans_count: _F64, h_start: _F64, h_trans: _F64, theta: _F64, *, alpha: float, start_alpha: float, kappa: float
) -> dict[str, float]: ...

# truncation-free SVI (Wang & Blei 2012): bnpcore::tfsvi
def tfsvi_batch(
    kind: str,
    indptr: Any,
    indices: Any,
    data: _F64,
    docs: Any,
    mass: _F64,
    mass_sum: _F64,
    scale: float,
    u: _F64,
    v: _F64,
    *,
    eta: float,
    gamma: float,
    alpha: float = 1.0,
    n_sweeps: int = 5,
    seed: int = 0,
    n_threads: Optional[int] = None,
) -> dict[str, Any]: ...
def antoniak_draws(n: int, c: float, n_draws: int, seed: int) -> Any: ...
def tfsvi_rng_draws(seed: int, what: str, n: int, a: float = 1.0, b: float = 1.0) -> Any: ...
