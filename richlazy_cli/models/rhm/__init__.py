"""The ``rhm`` family: sample complexity of the random hierarchy model against the relative
scale α (Kunin et al. 2024 §5, Fig. 6c; docs/rhm.md). ``model.py`` holds the model."""

from .model import RHM

__all__ = ["RHM"]
