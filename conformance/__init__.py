"""The conformance suite: adapter protocol, checks, runner, CLI and scenario catalog."""
