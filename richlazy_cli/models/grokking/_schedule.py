"""Grokking's optimiser schedule and evaluation bound, shared by the one-at-a-time training
(:mod:`richlazy_cli.models.grokking.model`) and the stacked one (:mod:`._stacked`).

A leaf module: it imports nothing of the package, so the two trainings share these numbers
without importing each other (docs/grokking.md). AdamW with betas (0.9, 0.98) and a linear
warm-up of the learning rate, lr_k = lr · (0.1 + 0.9 · min(k, 9)/9) at optimiser step k
(0-based), as the reference implementation's ``LinearLR(start_factor=0.1, total_iters=9)``.
"""

from __future__ import annotations

WARMUP_STEPS = 9
"""Optimiser steps of the linear warm-up."""
WARMUP_START = 0.1
"""Learning-rate factor of the first step."""
BETAS = (0.9, 0.98)
"""AdamW's (β₁, β₂)."""
EVAL_ROWS = 8192
"""Pairs evaluated at once in a full-set evaluation: it bounds the evaluation's memory (at
p = 2000 the training set holds two million pairs, whose logits alone would take 16 GB).
A set of at most this many pairs is evaluated in one call, as before; a larger one in
batches whose summed losses and counts give the same means up to rounding."""


def warmup_factor(step: int) -> float:
    """Learning-rate factor of optimiser step ``step`` (0-based): 0.1 → 1 linearly over the
    first 9 steps, then 1 (PyTorch's ``LinearLR(start_factor=0.1, total_iters=9)``)."""
    k = min(step, WARMUP_STEPS)
    return WARMUP_START + (1.0 - WARMUP_START) * k / WARMUP_STEPS
