"""The ``linear`` family: wide and deep linear networks (Kunin et al. 2024, §4; docs/linear.md).
``model.py`` holds the model and its closed forms."""

from .model import Linear

__all__ = ["Linear"]
