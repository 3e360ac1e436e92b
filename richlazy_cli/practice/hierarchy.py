"""The random hierarchy model, enumerated exactly (Cagnetta et al. 2024, as used by Kunin et
al. 2024 §5, Fig. 6c; docs/rhm.md §1).

Parameters: L levels, n_c classes, m synonyms, tuple length s, v symbols per level.

* Rules (:func:`rules`). The top level gives each class m distinct s-tuples over [v]; each
  lower level gives each of the v symbols m distinct s-tuples. Each level's tuples are drawn
  without replacement from the v^s possible ones (so n_c·m ≤ v^s and m·v ≤ v^s), hence a tuple
  has at most one parent: the grammar is unambiguous.
* Data (:func:`enumerate_inputs`). A datum is a class and one rule choice per produced symbol
  above the leaves: 1 + s + … + s^{L−1} = (s^L − 1)/(s − 1) choices of m each, so there are
  exactly P_max = n_c·m^{(s^L−1)/(s−1)} inputs (docs/rhm.md eq. (1)), all distinct (the
  grammar is unambiguous), each a string of s^L symbols.
"""

from __future__ import annotations

import itertools

import numpy as np


def p_max(n_classes: int, m: int, s: int, L: int) -> int:
    """n_c·m^{(s^L−1)/(s−1)} (docs/rhm.md eq. (1))."""
    return int(n_classes * m ** ((s**L - 1) // (s - 1)))


def rules(g: np.random.Generator, L: int, n_classes: int, m: int, s: int, v: int
          ) -> list[np.ndarray]:
    """The production rules, top level first: ``rules[0]`` has shape (n_c, m, s) (the tuples
    of each class), ``rules[l]`` for l ≥ 1 has shape (v, m, s) (the tuples of each symbol)."""
    all_tuples = np.array(list(itertools.product(range(v), repeat=s)), dtype=np.int8)
    out = []
    for level in range(L):
        parents = n_classes if level == 0 else v
        chosen = g.permutation(v**s)[: parents * m]
        out.append(all_tuples[chosen].reshape(parents, m, s))
    return out


def enumerate_inputs(rule_list: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Every input string (P_max × s^L, int8) and its class label (P_max, int64), class-major.

    A level's strings of ℓ symbols become strings of ℓ·s symbols in m^ℓ ways: every
    combination of one rule per symbol.
    """
    top = rule_list[0]
    n_classes, m, s = top.shape
    strings = top.reshape(n_classes * m, s)
    labels = np.repeat(np.arange(n_classes, dtype=np.int64), m)
    for R in rule_list[1:]:
        ell = strings.shape[1]
        choices = np.array(list(itertools.product(range(m), repeat=ell)), dtype=np.int64)
        # expanded[i, k, j] = R[strings[i, j], choices[k, j]]: (N, m^ℓ, ℓ, s)
        expanded = R[strings[:, None, :].astype(np.int64), choices[None, :, :]]
        strings = expanded.reshape(-1, ell * s)
        labels = np.repeat(labels, choices.shape[0])
    return strings, labels


def one_hot(strings: np.ndarray, v: int) -> np.ndarray:
    """Position-major one-hot encoding: feature ``j·v + strings[:, j]`` is 1 (float64)."""
    n, length = strings.shape
    x = np.zeros((n, length * v))
    x[np.arange(n)[:, None], np.arange(length)[None, :] * v + strings] = 1.0
    return x
