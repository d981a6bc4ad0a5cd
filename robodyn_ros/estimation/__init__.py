"""Online estimation: recursive least squares and the online estimator."""
