"""The PyTorch substrate of the "in practice" experiments (docs/practice.md).

Modules (importing torch, threads, determinism, device and dtype are
:mod:`richlazy_cli.numerics.compute`):
:mod:`.nets` (pure forward functions of a parameter dict, their initialisation and the relative
scale α), :mod:`.data` (offline data sources), :mod:`.metrics` (kernel, Hamming and parameter
distances, losses and accuracies, with ``torch.func``).

Nothing here imports torch at module level: the practice models are listed without it, and a
run without it is refused with one line naming the ``practice`` extra.
"""
