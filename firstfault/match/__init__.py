"""Signature registry and matching."""
