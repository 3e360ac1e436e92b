"""Tests of the PyTorch substrate of the practice experiments (docs/practice.md): the relative
scale α, the torch.func NTK against an explicitly assembled J Jᵀ, the distances, the offline
data sources, bad inputs, the missing-torch route and bitwise reproducibility of sweeps.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

torch = pytest.importorskip("torch")

from richlazy_cli.models.base import rng  # noqa: E402
from richlazy_cli.practice import data, metrics, nets  # noqa: E402
from tests.conftest import assert_one_line_error, assert_refused, run_process  # noqa: E402

F64 = torch.float64


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def forward_at(net: nets.Net, alpha: float, X: np.ndarray, seed: int = 3) -> np.ndarray:
    params = nets.to_torch(net.init(rng(seed, "init"), alpha), F64, "cpu")
    with torch.no_grad():
        return net.forward(params, torch.tensor(X, dtype=F64))[0].numpy()


# -- the relative scale α (docs/practice.md eq. (1)) ------------------------------------------

@pytest.mark.parametrize("alpha", [0.03, 0.1, 3.0, 10.0])
def test_alpha_leaves_the_function_unchanged_at_init(alpha: float) -> None:
    g = np.random.default_rng(0)
    cases = [
        (nets.mlp(32, 16, 3, 8), g.standard_normal((20, 32))),
        (nets.lenet("lenet_digits", (1, 8, 8)), g.standard_normal((20, 1, 8, 8))),
        (nets.lenet("lenet_digits", (1, 24, 24)), g.standard_normal((5, 1, 24, 24))),
        (nets.lenet("lenet5", (1, 28, 28)), g.standard_normal((5, 1, 28, 28))),
        (nets.lenet("lenet5", (3, 32, 32)), g.standard_normal((5, 3, 32, 32))),
        (nets.network("smooth2d", (1, 24, 24)), g.standard_normal((5, 1, 24, 24))),
        (nets.network("smooth2d", (3, 32, 32), 15), g.standard_normal((5, 3, 32, 32))),
        (nets.network("smooth1d", (1, 40)), g.standard_normal((5, 1, 40))),
    ]
    for net, X in cases:
        f1 = forward_at(net, 1.0, X)
        fa = forward_at(net, alpha, X)
        assert np.max(np.abs(fa - f1)) <= 1e-12
        assert np.max(np.abs(f1)) > 1e-3  # not a trivially zero function
        # and the layers really were rescaled
        p1, pa = net.init(rng(3, "init"), 1.0), net.init(rng(3, "init"), alpha)
        np.testing.assert_allclose(pa[net.first], p1[net.first] / alpha, rtol=1e-15)
        np.testing.assert_allclose(pa[net.readout], p1[net.readout] * alpha, rtol=1e-15)


def test_lenet_sizes_and_he_init() -> None:
    net = nets.lenet("lenet_digits", (1, 8, 8))
    assert net.n_params() == 19_754  # docs/cnn.md §1
    assert nets.lenet("lenet5", (1, 28, 28)).n_params() == 61_706  # LeNet-5
    p = net.init(np.random.default_rng(1), 1.0)
    w = p["fc1.weight"]
    assert w.std() == pytest.approx(np.sqrt(2 / 64), rel=0.05)
    assert all(np.all(p[k] == 0) for k in p if k.endswith("bias"))


# -- the NTK (docs/practice.md eq. (3)) and the distances -------------------------------------

def explicit_jacobian(net: nets.Net, params: dict, X: torch.Tensor) -> np.ndarray:
    """J[i, c, :] = ∂f_c(x_i)/∂θ, one autograd.grad call per (example, logit)."""
    leaves = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    rows = []
    for i in range(X.shape[0]):
        out = net.forward(leaves, X[i:i + 1])[0][0]
        per_c = []
        for c in range(out.shape[0]):
            grads = torch.autograd.grad(out[c], list(leaves.values()), retain_graph=True)
            per_c.append(torch.cat([g.reshape(-1) for g in grads]).numpy())
        rows.append(per_c)
    return np.array(rows)


@pytest.mark.parametrize("kind", ["trace", "full"])
def test_torch_func_kernel_equals_assembled_jacobian_product(kind: str) -> None:
    net = nets.mlp(12, 10, 2, 3)  # dense only
    params = nets.to_torch(net.init(np.random.default_rng(4), 2.0), F64, "cpu")
    X = torch.tensor(np.random.default_rng(5).standard_normal((7, 12)))
    J = explicit_jacobian(net, params, X)  # (n, c, P)
    n, c, _ = J.shape
    if kind == "trace":
        K_ref = sum(J[:, k] @ J[:, k].T for k in range(c))
    else:
        K_ref = J.reshape(n * c, -1) @ J.reshape(n * c, -1).T
    K = metrics.ntk(net.forward, params, X, kind).numpy()
    assert K.shape == K_ref.shape
    assert np.max(np.abs(K - K_ref)) <= 1e-10 * max(1.0, np.abs(K_ref).max())


def test_kernel_and_hamming_distances() -> None:
    g = np.random.default_rng(6)
    A = g.standard_normal((9, 9))
    K0 = torch.tensor(A @ A.T)
    B = A + 0.3 * g.standard_normal((9, 9))
    K1 = torch.tensor(B @ B.T)
    assert metrics.kernel_distance(K0, K0) == 0.0
    ref = 1 - np.sum(K0.numpy() * K1.numpy()) / (np.linalg.norm(K0) * np.linalg.norm(K1))
    assert metrics.kernel_distance(K0, K1) == pytest.approx(ref, abs=1e-14)
    assert metrics.kernel_distance(K0, 5.0 * K0) == pytest.approx(0.0, abs=1e-15)
    z0 = [torch.tensor(g.standard_normal((4, 3, 2))), torch.tensor(g.standard_normal((4, 5)))]
    z1 = [z0[0].clone(), -z0[1]]
    b0, b1 = metrics.activation_bits(z0), metrics.activation_bits(z1)
    assert b0.shape == (4, 11)
    assert metrics.hamming_distance(b0, b0) == 0.0
    assert metrics.hamming_distance(b0, b1) == pytest.approx(20 / 44)
    p0 = {"a": torch.tensor([3.0, 0.0]), "b": torch.tensor([[0.0, 4.0]])}
    p1 = {"a": torch.tensor([3.0, 1.0]), "b": torch.tensor([[2.0, 4.0]])}
    d, rel = metrics.param_distance(p1, p0)
    assert d == pytest.approx(np.sqrt(5)) and rel == pytest.approx(np.sqrt(5) / 5)


# -- data sources ----------------------------------------------------------------------------

def test_digits_split_is_stratified_and_seeded() -> None:
    a, b, c = data.load("digits", 0), data.load("digits", 0), data.load("digits", 1)
    assert a.X_train.shape == (1437, 1, 8, 8) and a.X_test.shape == (360, 1, 8, 8)
    assert np.array_equal(a.X_train, b.X_train) and not np.array_equal(a.y_train, c.y_train)
    counts = np.bincount(a.y_test, minlength=10)
    full = np.bincount(np.concatenate([a.y_train, a.y_test]), minlength=10)
    assert np.all(np.abs(counts - 0.2 * full) < 1)
    assert a.X_train.mean() == pytest.approx(0, abs=1e-12)
    assert a.X_train.std() == pytest.approx(1, abs=1e-12)
    assert data.load("digits24", 0).X_train.shape == (1437, 1, 24, 24)


def test_mnist1d_is_generated_offline_and_keeps_global_random_state() -> None:
    np_state = np.random.get_state()[1].copy()  # noqa: NPY002
    py_state = random.getstate()
    d = data.load("mnist1d", 0)
    assert d.X_train.shape == (4000, 1, 40) and d.X_test.shape == (1000, 1, 40)
    assert set(np.unique(d.y_train)) == set(range(10))
    assert np.array_equal(np.random.get_state()[1], np_state)  # noqa: NPY002
    assert random.getstate() == py_state


def test_npz_source_round_trip(tmp_path: Path) -> None:
    g = np.random.default_rng(0)
    X = g.integers(0, 256, size=(50, 28, 28, 1)).astype(np.uint8)  # channels last
    y = np.arange(50) % 10
    path = tmp_path / "mnist.npz"
    np.savez(path, X=X, y=y)
    assert data.check_source("npz", str(path)) == (1, 28, 28)
    split = data.load("npz", 0, str(path))
    assert split.X_train.shape == (40, 1, 28, 28) and split.X_test.shape == (10, 1, 28, 28)


# -- bad inputs: one line, exit 2, nothing written --------------------------------------------

def _npz(tmp_path: Path, name: str, **arrays: np.ndarray) -> str:
    path = tmp_path / name
    np.savez(path, **arrays)
    return str(path)


def bad_cases(tmp_path: Path) -> list[tuple[list[str], str]]:
    X = np.zeros((20, 8, 8))
    y = np.arange(20) % 10
    Xn = X.copy()
    Xn[3, 2, 2] = np.nan
    junk = tmp_path / "junk.npz"
    junk.write_text("not a zip file")
    cnn = ["train", "cnn", "-p", "epochs=1"]
    rhm = ["train", "rhm", "-p", "epochs=1", "-p", "L=2", "-p", "test_size=100"]
    npz = [*cnn, "-p", "dataset=npz", "-p"]
    return [
        ([*cnn, "-p", "dataset=cifar"], "not one of"),
        ([*cnn, "-p", "dataset=npz"], "data_file: required"),
        ([*npz, f"data_file={tmp_path / 'absent.npz'}"], "no such file"),
        ([*npz, f"data_file={junk}"], "not a readable .npz"),
        ([*npz, "data_file=" + _npz(tmp_path, "keys.npz", images=X, y=y)], "missing array"),
        ([*npz, "data_file=" + _npz(tmp_path, "nan.npz", X=Xn, y=y)], "NaN"),
        ([*npz, "data_file=" + _npz(tmp_path, "lab.npz", X=X, y=y + 5)], "outside [0, 9]"),
        ([*npz, "data_file=" + _npz(tmp_path, "len.npz", X=X, y=y[:10])], "must have shape"),
        ([*npz, "data_file=" + _npz(tmp_path, "shape.npz", X=np.zeros((20, 2, 2, 2, 2)), y=y)],
         "expected (N, H, W)"),
        ([*npz, "data_file=" + _npz(tmp_path, "half.npz", X=X, y=y, X_test=X)],
         "both X_test and y_test"),
        ([*npz, "data_file=" + _npz(tmp_path, "frac.npz", X=X, y=y + 0.5)], "whole-number"),
        ([*cnn, "-p", "alpha=0"], "alpha"),
        ([*cnn, "-p", "alpha=-1"], "alpha"),
        ([*rhm, "-p", "train_fraction=0"], "train_fraction"),
        ([*rhm, "-p", "train_fraction=1.5"], "train_fraction"),
        ([*rhm, "-p", "train_fraction=1"], "training inputs"),  # leaves no test set
        ([*rhm, "-p", "m=9"], "n_c*m"),
        ([*cnn, "-p", "device=cuda"], "no CUDA device"),
        ([*cnn, "-p", "arch=lenet5"], "lenet5 needs 28x28"),
        ([*cnn, "-p", "dataset=mnist1d"], "needs images"),
        ([*cnn, "-p", "dataset=digits", "-p", "data_file=x.npz"], "only read"),
    ]


def test_bad_inputs_exit_2_with_one_line_and_write_nothing(tmp_path: Path, cli) -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    out = tmp_path / "out.h5"
    for args, phrase in bad_cases(tmp_path):
        assert_refused(cli, args, phrase, out)
    # a grid with one bad point is refused before anything runs
    res = cli("sweep", "train", "cnn", "-g", "alpha=1,0", "-p", "epochs=1", "-o", str(out))
    assert_one_line_error(res)
    assert not list(tmp_path.glob("out.h5*"))


def test_without_torch_models_are_listed_and_runs_exit_2(tmp_path: Path) -> None:
    out = tmp_path / "x.h5"
    code = (
        "import contextlib, io, json, sys\n"
        "sys.modules['torch'] = None\n"
        "from richlazy_cli.cli.app import run\n"
        "results = {}\n"
        "for args in (['models', '--json'], ['train', 'rhm', '-o', sys.argv[1]],\n"
        "             ['train', 'cnn', '-o', sys.argv[1]]):\n"
        "    o, e = io.StringIO(), io.StringIO()\n"
        "    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):\n"
        "        code = run(args)\n"
        "    results[args[1]] = [code, o.getvalue(), e.getvalue()]\n"
        "print(json.dumps(results))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.splitlines()[-1])
    code, listing, _ = results["--json"]
    assert code == 0
    assert {"rhm", "cnn"} <= {m["name"] for m in json.loads(listing)}
    for model in ("rhm", "cnn"):
        code, _, err = results[model]
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2 and len(lines) == 1 and "richlazy[practice]" in lines[0], err
    assert not out.exists()


# -- reproducibility -------------------------------------------------------------------------

RHM_GRID = ["-g", "alpha=0.1,10", "-g", "train_fraction=0.1,0.3", "-g", "seed=0,1",
            "-p", "L=2", "-p", "width=16", "-p", "epochs=4", "-p", "test_size=100",
            "-p", "n_records=3", "-p", "batch=32"]
CNN_GRID = ["-g", "alpha=0.1,10", "-g", "seed=0,1", "-p", "epochs=1", "-p", "batch=512",
            "-p", "first_steps=3", "-p", "probe_fraction=0.02", "-p", "dtype=float32"]


@pytest.mark.parametrize(("model", "grid"), [("rhm", RHM_GRID), ("cnn", CNN_GRID)])
def test_sweep_is_bitwise_identical_for_any_jobs_and_chunking(tmp_path: Path, cli, model: str,
                                                              grid: list[str]) -> None:
    one = tmp_path / "one.h5"
    two = tmp_path / "two.h5"
    r1 = cli("sweep", "train", model, *grid, "-o", one, "--jobs", "1", "-q")
    assert r1.code == 0, r1.err
    r2 = run_process("sweep", "train", model, *grid, "-o", two, "--jobs", "2",
                     "--chunk-size", "3", "-q")
    assert r2.code == 0, r2.err
    a = xr.open_dataset(one, engine="h5netcdf")
    b = xr.open_dataset(two, engine="h5netcdf")
    for name in a.data_vars:
        if name != "elapsed":
            assert np.array_equal(a[name].values, b[name].values, equal_nan=True), name
    assert a.attrs["torch_version"] == torch.__version__ and a.attrs["device"] == "cpu"
    a.close()
    b.close()


def test_concurrent_sessions_hold_one_thread_until_the_last_ends() -> None:
    """The threads backend runs model calls side by side in one process: torch stays at one
    intra-op thread until every one of them has finished."""
    from richlazy_cli.numerics import compute

    torch.set_num_threads(2)
    outer = compute.session()
    outer.__enter__()
    inner = compute.session()
    inner.__enter__()
    outer.__exit__(None, None, None)  # the first to start ends first
    assert torch.get_num_threads() == 1 and torch.are_deterministic_algorithms_enabled()
    inner.__exit__(None, None, None)
    assert torch.get_num_threads() == 2 and not torch.are_deterministic_algorithms_enabled()


def test_accuracy_alone_is_the_accuracy_of_evaluate() -> None:
    """metrics.accuracy (no loss) counts the same predictions as metrics.evaluate, over blocks
    that do not divide the data set; and both are the exact fraction of right predictions."""
    net = nets.mlp(12, 8, 2, 5)
    params = nets.to_torch(net.init(np.random.default_rng(3), 1.0), torch.float32, "cpu")
    X = torch.tensor(np.random.default_rng(4).standard_normal((1001, 12)), dtype=torch.float32)
    y = torch.tensor(np.random.default_rng(5).integers(0, 5, 1001))
    with torch.no_grad():
        right = int((net.forward(params, X)[0].argmax(dim=1) == y).sum())
    assert 0 < right < 1001
    assert metrics.accuracy(net.forward, params, X, y, block=97) == right / 1001
    assert metrics.evaluate(net.forward, params, X, y, block=97)[1] == right / 1001


def test_logits_that_are_not_numbers_predict_nothing() -> None:
    """A network whose weights overflowed gives NaN logits: their argmax is no prediction, so
    both accuracies are NaN beside the NaN loss (not the share of the first class)."""
    net = nets.mlp(12, 8, 2, 5)
    params = nets.to_torch(net.init(np.random.default_rng(3), 1.0), torch.float32, "cpu")
    params = {k: torch.full_like(q, float("nan")) for k, q in params.items()}
    X = torch.tensor(np.random.default_rng(4).standard_normal((100, 12)), dtype=torch.float32)
    y = torch.zeros(100, dtype=torch.int64)  # argmax of NaN logits is 0: all "right"
    loss, acc = metrics.evaluate(net.forward, params, X, y, block=30)
    assert np.isnan(loss) and np.isnan(acc)
    assert np.isnan(metrics.accuracy(net.forward, params, X, y, block=30))


def test_declared_training_set_sizes_are_the_sources_sizes() -> None:
    """``cnn`` declares its output's bytes from these sizes before any data are loaded."""
    for name, n in data.TRAIN_SIZES.items():
        split = data.load(name, 3)
        assert split.y_train.size == n, name
        assert split.sample_shape == data.SAMPLE_SHAPES[name], name
