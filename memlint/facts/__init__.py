"""Facts about training runs: what documents state, merged into plans, resolved for the estimator."""
