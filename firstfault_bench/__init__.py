"""Benchmarks: accuracy on labelled bundles, speed against grep."""
