"""The harness: runs one scenario against a gateway, records its observations, judges them."""
