"""Symbolic composition (placeholder until the graph bindings land)."""
