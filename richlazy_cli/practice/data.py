"""Offline data sources of the practice experiments (docs/practice.md §4).

* ``digits``: scikit-learn's bundled ``load_digits`` (1797 × 8×8, 10 classes), split 80/20 by
  seed;
* ``digits24``: ``digits`` upsampled ×3 by cubic spline (``scipy.ndimage.zoom``), 24×24;
* ``mnist1d``: the ``mnist1d`` package's procedural generator (never its download), 4000
  training and 1000 test samples of length 40;
* ``npz``: a user's file with ``X``, ``y`` and optionally ``X_test``, ``y_test`` (e.g. MNIST or
  CIFAR-10 fetched elsewhere).

Images are (samples, channels, height, width); ``mnist1d`` samples are (1, 40). Every source is
standardised with the training set's mean and standard deviation (one scalar each). Labels are
integers in [0, 10). A source without its own test set is split by ``rng(seed, "split")``
into a stratified 80/20 train/test split (:func:`stratified_split`).
"""

from __future__ import annotations

import functools
import hashlib
import io
import math
import random
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..errors import BadInput
from ..numerics.randomness import rng
from ..userfiles import open_regular, read_npz_from

SOURCES = ("digits", "digits24", "mnist1d", "npz")
SAMPLE_SHAPES = {"digits": (1, 8, 8), "digits24": (1, 24, 24), "mnist1d": (1, 40)}
"""The shape of one sample of each bundled source."""
TRAIN_SIZES = {"digits": 1437, "digits24": 1437, "mnist1d": 4000}
"""Training-set sizes of the bundled sources: 80% of the 1,797 digits, stratified; mnist1d's
own 4,000/1,000 split."""
N_CLASSES = 10
TEST_FRACTION = 0.2


@dataclass(frozen=True)
class DataSplit:
    """Training and test sets (float64 inputs, int64 labels)."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return tuple(self.X_train.shape[1:])


def stratified_split(y: np.ndarray, g: np.random.Generator,
                     test_fraction: float = TEST_FRACTION) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) indices, each sorted: ⌈test_fraction·N⌉ test samples, shared among the
    classes in proportion to their sizes (floors, then the largest remainders, ties to the
    smaller label), each class's members chosen by a permutation from ``g``."""
    classes, counts = np.unique(y, return_counts=True)
    n_test = math.ceil(test_fraction * y.size)
    exact = counts * n_test / y.size
    quota = np.floor(exact).astype(int)
    order = np.lexsort((classes, -(exact - quota)))
    quota[order[: n_test - quota.sum()]] += 1
    test = []
    for c, q in zip(classes, quota, strict=True):
        members = np.flatnonzero(y == c)
        test.append(members[g.permutation(members.size)[:q]])
    test_idx = np.sort(np.concatenate(test))
    train_idx = np.setdiff1d(np.arange(y.size), test_idx)
    return train_idx, test_idx


@functools.cache
def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    d = load_digits()
    return d.images[:, None, :, :].astype(np.float64) / 16.0, d.target.astype(np.int64)


@functools.cache
def _digits24() -> tuple[np.ndarray, np.ndarray]:
    from scipy.ndimage import zoom

    X, y = _digits()
    return np.stack([zoom(img, 3, order=3) for img in X[:, 0]])[:, None], y


@functools.cache
def _mnist1d() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The mnist1d package's default data set, generated procedurally. Its generator seeds
    NumPy's and Python's global states; they are restored afterwards."""
    from mnist1d.data import get_dataset_args, make_dataset

    state = np.random.get_state()  # noqa: NPY002 (the package's own global seeding)
    py_state = random.getstate()
    try:
        d = make_dataset(get_dataset_args())
    finally:
        np.random.set_state(state)  # noqa: NPY002
        random.setstate(py_state)
    return (np.asarray(d["x"], np.float64)[:, None, :], np.asarray(d["y"], np.int64),
            np.asarray(d["x_test"], np.float64)[:, None, :], np.asarray(d["y_test"], np.int64))


def _as_images(X: np.ndarray, key: str, path: str) -> np.ndarray:
    if X.ndim == 3:
        return X[:, None]
    if X.ndim == 4:
        if X.shape[1] in (1, 3):
            return X
        if X.shape[3] in (1, 3):
            return np.ascontiguousarray(X.transpose(0, 3, 1, 2))
    if X.ndim == 2:
        return X[:, None, :]
    raise BadInput(f"data_file {path}: {key} has shape {X.shape}; expected (N, H, W), "
                   "(N, C, H, W), (N, H, W, C) or (N, L)")


def _labels(y: np.ndarray, key: str, n: int, path: str) -> np.ndarray:
    if y.ndim != 1 or y.shape[0] != n:
        raise BadInput(f"data_file {path}: {key} must have shape ({n},), not {y.shape}")
    if not np.issubdtype(y.dtype, np.number) or not np.all(np.isfinite(y)) \
            or not np.all(y == np.round(y)):
        raise BadInput(f"data_file {path}: {key} must hold whole-number class labels")
    if y.size and (y.min() < 0 or y.max() >= N_CLASSES):
        raise BadInput(f"data_file {path}: {key} holds labels outside [0, {N_CLASSES - 1}]")
    return y.astype(np.int64)


def _inputs(X: np.ndarray, key: str, path: str) -> np.ndarray:
    if not np.issubdtype(X.dtype, np.number) or np.issubdtype(X.dtype, np.complexfloating):
        raise BadInput(f"data_file {path}: {key} must be a real numeric array")
    X = X.astype(np.float64)
    if X.shape[0] < (2 if key == "X" else 1):  # one training sample cannot be split or fit
        raise BadInput(f"data_file {path}: {key} holds {X.shape[0]} sample(s); "
                       f"at least {2 if key == 'X' else 1} needed")
    if not np.all(np.isfinite(X)):
        raise BadInput(f"data_file {path}: {key} holds NaN or infinite values")
    return _as_images(X, key, path)


NpzArrays = tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]
CACHED_FILES = 4
"""How many users' files :func:`read_npz` keeps, validated, by the SHA-256 of their bytes."""
_CACHE: OrderedDict[str, NpzArrays] = OrderedDict()
_CACHE_LOCK = threading.Lock()


def read_npz(path: str) -> NpzArrays:
    """(X, y, X_test, y_test) of a user's ``.npz`` file, validated (X_test and y_test may be
    None). Any problem is BadInput naming the file and what is wrong.

    The file is read once into memory and the arrays are taken from those bytes; the
    validated arrays are kept by the bytes' SHA-256 (the hash a sweep's input record holds,
    docs/engine.md), so the numbers always come from the contents just read: a file rewritten
    with other contents is read anew even when its path, size and modification time are
    those of the old one (``cp -p``, ``rsync -a``). Hashing costs a fraction of the parsing
    that the cache saves on every later point of a sweep (``bench/data_cache.py``).
    """
    # a regular file, headers checked before loading, only the four arrays read
    with open_regular(path, "data_file") as fh:
        content = fh.read()
    digest = hashlib.sha256(content).hexdigest()
    with _CACHE_LOCK:
        if digest in _CACHE:
            _CACHE.move_to_end(digest)
            return _CACHE[digest]
    found = _parse_npz(content, path)
    del content
    with _CACHE_LOCK:
        _CACHE[digest] = found
        while len(_CACHE) > CACHED_FILES:
            _CACHE.popitem(last=False)
    return found


def _parse_npz(content: bytes, path: str) -> NpzArrays:
    arrays = read_npz_from(io.BytesIO(content), path, "data_file", ("X", "y"),
                           ("X_test", "y_test"), dtype=None)
    if ("X_test" in arrays) != ("y_test" in arrays):
        raise BadInput(f"data_file {path}: give both X_test and y_test, or neither")
    X = _inputs(arrays["X"], "X", path)
    y = _labels(arrays["y"], "y", X.shape[0], path)
    if "X_test" not in arrays:
        return X, y, None, None
    Xt = _inputs(arrays["X_test"], "X_test", path)
    yt = _labels(arrays["y_test"], "y_test", Xt.shape[0], path)
    if Xt.shape[1:] != X.shape[1:]:
        raise BadInput(f"data_file {path}: X_test samples have shape {Xt.shape[1:]}, "
                       f"X samples {X.shape[1:]}")
    return X, y, Xt, yt


def check_source(dataset: str, data_file: str | None) -> tuple[int, ...]:
    """Validate a source (reading a user's file); returns the shape of one sample."""
    if dataset == "npz":
        if not data_file:
            raise BadInput("parameter data_file: required when dataset = npz")
        X = read_npz(data_file)[0]
        return tuple(X.shape[1:])
    return SAMPLE_SHAPES[dataset]


def load(dataset: str, seed: int, data_file: str | None = None) -> DataSplit:
    """The standardised train/test split of a source for one seed."""
    test: tuple[np.ndarray, np.ndarray] | None = None
    if dataset == "digits":
        X, y = _digits()
    elif dataset == "digits24":
        X, y = _digits24()
    elif dataset == "mnist1d":
        X, y, Xt, yt = _mnist1d()
        test = (Xt, yt)
    elif dataset == "npz":
        assert data_file is not None
        X, y, Xt_npz, yt_npz = read_npz(data_file)
        if Xt_npz is not None and yt_npz is not None:  # read_npz gives both or neither
            test = (Xt_npz, yt_npz)
    else:
        raise BadInput(f"unknown dataset {dataset!r}; known: {', '.join(SOURCES)}")
    if test is None:
        tr, te = stratified_split(y, rng(seed, "split"))
        X_train, y_train, X_test, y_test = X[tr], y[tr], X[te], y[te]
    else:
        X_train, y_train, (X_test, y_test) = X, y, test
    mean, std = float(X_train.mean()), float(X_train.std())
    std = std if std > 0 else 1.0
    return DataSplit((X_train - mean) / std, y_train, (X_test - mean) / std, y_test)
