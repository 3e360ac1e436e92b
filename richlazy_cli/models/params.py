"""Re-export of :mod:`richlazy_cli.params` (model parameters live on the ground floor, below
both ``models/`` and ``practice/``); kept so that ``from .params import Param`` still works."""

from ..params import Kind, Param, jsonable, suggest

__all__ = ["Kind", "Param", "jsonable", "suggest"]
