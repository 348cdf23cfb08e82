//! # bnpcore — variational inference kernels for Bayesian nonparametric clustering
//!
//! This crate is the pure-Rust core of the `bnpcore` Python package, usable on its own from
//! any Rust program. It knows nothing about Python, files, random seeds or loops over laps: every
//! function takes array views and returns owned results or an [`Error`].
//!
//! The four verbs shared with the Python layer are:
//!
//! * **local step** ([`local::local_step`]): responsibilities `r_nk ∝ exp(E[log F(x_n|φ_k)] + E[log π_k])`
//!   for a batch, immediately reduced to additive summaries (never returned unless asked for);
//! * **summarize**: weighted sufficient statistics `(N_k, S_k)`, additive over disjoint data;
//! * **global step**: the posterior `prior ⊕ (N, S)` ([`obs::ObsModel::posterior`]);
//! * **ELBO** from summaries only ([`obs::Obs::elbo_data`], [`alloc`]).
//!
//! Global parameters are represented as *effective summaries* `(N_eff, S_eff)`: every posterior of
//! the conjugate exponential families used here is `prior ⊕ (N_eff, S_eff)` in natural coordinates,
//! so full-dataset, memoized and stochastic learning all share one representation.
//!
//! Reductions over rows use a fixed binary tree over fixed-size row chunks ([`parallel`]), so results
//! are bit-identical whatever the number of rayon threads.
//!
//! Mathematical reference: Hughes, *Scalable variational inference for Bayesian nonparametric
//! models* (PhD thesis), chapters 2–4; Hughes & Sudderth (NIPS 2013).

pub mod alloc;
pub mod error;
pub mod fresh;
pub mod linalg;
pub mod local;
pub mod obs;
pub mod parallel;
pub mod special;
#[cfg(test)]
mod test_rng;
pub mod tfsvi;

pub use error::{Error, Result};
pub use obs::{Obs, ObsModel};
