//! Error type of the core crate.

/// Everything that can go wrong in a core call. Messages name the offending argument and, where
/// possible, suggest a fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// An array has the wrong shape.
    #[error("shape mismatch for `{name}`: expected {expected}, got {got}")]
    Shape {
        /// argument name
        name: String,
        /// expected shape, in words
        expected: String,
        /// received shape
        got: String,
    },
    /// A hyperparameter or option is outside its domain.
    #[error("invalid parameter `{name}`: {reason}")]
    InvalidParam {
        /// argument name
        name: String,
        /// why it is invalid
        reason: String,
    },
    /// A NaN or infinite value was found.
    #[error("non-finite value (NaN or inf) in {what}")]
    NonFinite {
        /// where it was found
        what: String,
    },
    /// Data outside the support of the observation model (negative counts, non-binary values...).
    #[error("invalid data in `{name}`: {reason}")]
    InvalidData {
        /// argument name
        name: String,
        /// what is wrong
        reason: String,
    },
    /// A posterior scale matrix lost positive definiteness.
    #[error(
        "the {what} matrix of cluster {component} is not positive definite; \
         increase `prior_covariance` / `prior_dof` or rescale the data (obs='ar_gauss': \
         increase `prior_scale` / `prior_dof`; its model has no intercept, so a series far \
         from 0 must be centred by the caller)"
    )]
    NotPositiveDefinite {
        /// cluster index
        component: usize,
        /// which matrix
        what: String,
    },
    /// A quantity that must be finite (e.g. an objective) is not.
    #[error("numerical failure: {what}")]
    Numerical {
        /// what went wrong
        what: String,
    },
}

/// Result alias of the core crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Shorthand for [`Error::Shape`].
    pub fn shape(name: &str, expected: impl ToString, got: impl ToString) -> Self {
        Error::Shape { name: name.into(), expected: expected.to_string(), got: got.to_string() }
    }
    /// Shorthand for [`Error::InvalidParam`].
    pub fn param(name: &str, reason: impl ToString) -> Self {
        Error::InvalidParam { name: name.into(), reason: reason.to_string() }
    }
    /// Shorthand for [`Error::InvalidData`].
    pub fn data(name: &str, reason: impl ToString) -> Self {
        Error::InvalidData { name: name.into(), reason: reason.to_string() }
    }
}
