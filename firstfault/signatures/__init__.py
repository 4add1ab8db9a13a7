"""Bundled signature files (TOML, one per family); see docs/signatures.md."""
