"""`python -m conformance.cli`: the `sessiongate` command."""

from conformance.cli import entry

entry()
