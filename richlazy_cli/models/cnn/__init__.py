"""The ``cnn`` family: a LeNet's kernel, Hamming and parameter distances against the relative
scale α (Kunin et al. 2024 §5, Fig. 6a; docs/cnn.md).

``model.py`` holds the model (one configuration at a time, the reference); ``_stacked.py``
trains the configurations of a chunk together as one stacked network on a device.
"""

from .model import CNN

__all__ = ["CNN"]
