"""``python -m firstfault.cli``: the same as the ``firstfault`` command."""

from firstfault.cli import main

main()
