"""Per-source parsers: bytes in, typed events out."""
