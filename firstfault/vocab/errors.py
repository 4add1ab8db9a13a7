"""One family of errors: everything firstfault raises on purpose derives from :class:`FirstfaultError`.

The flight-recorder loader's errors (``flightrec.pickle_errors.DumpLoadError`` and its kinds) are
:class:`InputError` too; they carry the file they are about.

The command line turns an :class:`InputError` into exit code 2 and one line (never a traceback);
anything else that escapes is a bug.
"""

from __future__ import annotations


class FirstfaultError(Exception):
    """Base of every error firstfault raises on purpose."""


class InputError(FirstfaultError):
    """The input cannot be used at all: a missing path, an archive bomb, a file that is not a job log."""


class SignatureError(InputError, ValueError):
    """A signature file is malformed; the message names the file and the signature."""


class ReportError(FirstfaultError):
    """A report cannot be written where it was asked for (a missing directory, a directory as file)."""


# The name the rest of the code and the tests have always used for unusable input.
BundleError = InputError
