"""The ``two-layer`` family: teacher–student two-layer piecewise-linear networks over (τ, δ)
(Kunin et al. 2024; docs/two-layer.md).

``model.py`` holds the model; ``_kernels.py`` the NumPy training step and its kernels, ``_jit.py``
the same loop compiled with numba, ``_torch.py`` the whole batch on a torch device;
``_geometry.py`` the checkpoint geometry (alignment, direction change); ``_data.py`` the data
sources besides the ReLU teacher; ``relu_partition.py`` the activation regions of a deep ReLU
network on the plane (Fig. 9), which the figures draw.
"""

from .model import TwoLayer

__all__ = ["TwoLayer"]
