"""`python -m conformance.cli`: the `sessiongate` command."""

from conformance.cli import main

raise SystemExit(main())
