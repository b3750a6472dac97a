"""The simulator: virtual clock, discrete-event engine, scenarios, generators, faults."""
