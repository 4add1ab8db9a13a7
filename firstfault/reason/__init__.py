"""Reasoning stages: from correlated evidence to the verdict (window, unrecognised errors, ...)."""
