"""The ``hermite`` family: additive Hermite tasks, emergence and scaling laws in shallow networks
(Ren et al. 2025; docs/hermite.md, docs/hermite-sgd.md).

``model.py`` holds the model and its NumPy population flow; ``_population.py`` the population
loss and gradient (written once for NumPy and torch); ``_poly.py`` the Hermite polynomials;
``_torch.py`` the batched flow on a torch device; ``_sgd.py`` and ``_jit.py`` online SGD (the
NumPy step and its numba loop); ``_diagnostics.py`` the plateau and recovery diagnostics.
"""

from .model import Hermite

__all__ = ["Hermite"]
