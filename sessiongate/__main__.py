"""`python -m sessiongate`: the `sessiongate` command."""

from conformance.cli import main

raise SystemExit(main())
