"""The ``grokking`` family: time to grokking of modular arithmetic against the embedding scale α
(Kunin et al. 2024, Fig. 6d and Fig. 12; docs/grokking.md).

``model.py`` holds the model (one run at a time, the reference); ``_stacked.py`` trains the runs
of a chunk together; ``_schedule.py`` is the optimiser schedule both share.
"""

from .model import Grokking

__all__ = ["Grokking"]
