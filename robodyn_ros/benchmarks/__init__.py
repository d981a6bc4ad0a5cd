"""Benchmarks behind ``robodyn bench kernels|mpc|nodes``: each module has ``run(json: bool) -> dict``."""
