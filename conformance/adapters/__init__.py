"""Adapters that drive real third-party gateways through sessiongate scenarios.

Each adapter implements `conformance.adapter.Gateway` on top of the gateway's own code,
replacing only what the simulation must own: the LLM, the clock, the network and the
threads whose timing would make a run unrepeatable.
"""
