"""Benchmarks: each prints ratios against a floor or baseline measured in the same run (machines are noisy)."""
