"""Learning algorithms: full-dataset, memoized and stochastic variational inference."""
