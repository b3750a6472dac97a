"""The out-of-process transport: a gateway in a child process over JSON lines (docs/protocol.md)."""
