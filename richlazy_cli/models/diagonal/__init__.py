"""The ``diagonal`` family: diagonal linear networks with untied weights (Azulay et al. 2021,
§4 and §7/§9; docs/diagonal.md). ``model.py`` holds the model and its closed forms."""

from .model import DiagonalModel

__all__ = ["DiagonalModel"]
