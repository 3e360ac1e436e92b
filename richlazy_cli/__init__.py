"""richlazy: batch simulations of lazy versus rich (feature-learning) training regimes."""

__version__ = "0.2.0"
