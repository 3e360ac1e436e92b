"""Grids, execution and the result store."""
