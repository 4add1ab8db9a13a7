"""The errors of loading one flight-recorder dump: one base class, one subclass per way it fails.

Every loader (the pure-Python interpreter, the capped C unpickler, the file reader) raises only
these, so a caller loading 16,384 dumps turns each failure into one warning line, and the CLI's
one-line error for bad input (``vocab.errors.InputError``) covers them all.
"""

from __future__ import annotations

from firstfault.vocab.errors import InputError


class DumpLoadError(InputError):
    """Base of every error raised while reading one dump file.

    Carries the file name so a caller that loads thousands of dumps can turn each
    failure into one warning line instead of a traceback.
    """

    def __init__(self, source: str, message: str) -> None:
        super().__init__(f"{source}: {message}")
        self.source = source
        self.detail = message


class UnsafePickleError(DumpLoadError):
    """The pickle asks for something other than plain data (a global, a call).

    ``refused`` names what was refused: ``module.name`` for a global, or the
    opcode name when no global name is available.
    """

    def __init__(self, source: str, refused: str, opcode: str) -> None:
        super().__init__(
            source,
            f"refused to unpickle {refused!r} (opcode {opcode}): flight-recorder dumps "
            "contain only plain data; this file asks for code to be run",
        )
        self.refused = refused
        self.opcode = opcode


class TruncatedPickleError(DumpLoadError):
    """The pickle ends before its STOP opcode (a dump cut short while writing)."""


class MalformedPickleError(DumpLoadError):
    """The bytes are not a well-formed pickle (garbage, wrong format, bad opcode)."""


class DumpTooLargeError(DumpLoadError):
    """The file is larger than the configured cap."""


class EmptyFileError(DumpLoadError):
    """The file has zero bytes (a dump that was never written)."""
