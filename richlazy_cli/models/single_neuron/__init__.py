"""The ``single-neuron`` family: exact single-neuron flows (Kunin et al. 2024, §3;
docs/single-neuron.md) and Azulay et al.'s (2021) neurons (docs/azulay-theory.md).

``model.py`` holds the model; ``_halves.py`` the two roots of the conserved quantity;
``_extras.py`` the basins, the Riccati variable and Hessian maps; ``leaky.py`` the leaky-ReLU
neuron (Theorem 4); ``fully_connected.py`` the fully connected neuron in the (α, s, u)
parametrisation (Theorem 2). The last two are public: the figures draw from them.
"""

from .model import SingleNeuron

__all__ = ["SingleNeuron"]
