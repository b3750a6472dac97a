"""`python -m sessiongate`: the `sessiongate` command."""

from conformance.cli import entry

entry()
