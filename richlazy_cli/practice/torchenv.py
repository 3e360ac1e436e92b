"""Deprecated: importing torch, the deterministic session, devices and dtypes are
:mod:`richlazy_cli.numerics.compute`; these names are kept as aliases of it."""

from __future__ import annotations

from ..numerics.compute import provenance, resolve_device, run_params, session, torch_dtype

__all__ = ["provenance", "resolve_device", "run_params", "session", "torch_dtype"]
