"""Tests of the ``grokking`` model (docs/grokking.md): the modular-arithmetic data, the
embedding scale α and logit scale τ, training against a plain PyTorch loop built on
``nn.TransformerEncoderLayer``, censoring, bad inputs, the missing-torch route and bitwise
reproducibility of sweeps.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

torch = pytest.importorskip("torch")

from richlazy_cli.models.base import Batch, rng  # noqa: E402
from richlazy_cli.models.grokking import model as gk  # noqa: E402
from richlazy_cli.models.grokking._schedule import warmup_factor  # noqa: E402
from richlazy_cli.models.grokking.model import Grokking  # noqa: E402
from tests.conftest import assert_one_line_error, assert_refused, run_process  # noqa: E402

CI = dict(p=11, d_model=16, n_heads=4, steps=200, eval_every=20)
"""CI size: 121 pairs, 60 for training (docs/grokking.md §4)."""


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def train(points: list[dict[str, Any]], **common: Any) -> xr.Dataset:
    values = [Grokking.resolve("train", {**common, **p}) for p in points]
    return Grokking().train(Batch.from_points(Grokking, values))


@pytest.mark.parametrize("op", gk.OPS)
def test_modular_data_is_every_pair_with_its_residue(op: str) -> None:
    p = 13
    X, y = gk.modular_data(p, op)
    N = gk.n_pairs(p, op)
    assert X.shape == (N, 4) and y.shape == (N,)
    assert np.all(X[:, 1] == p) and np.all(X[:, 3] == p + 1)
    pairs = {(int(a), int(b)) for a, b in X[:, [0, 2]]}
    assert len(pairs) == N
    for (a, b), c in zip(X[:, [0, 2]], y, strict=True):
        if op == "x+y":
            assert c == (a + b) % p
        elif op == "x-y":
            assert (c + b) % p == a
        elif op == "x*y":
            assert c == (a * b) % p
        else:
            assert b != 0 and (c * b) % p == a
    assert y.min() >= 0 and y.max() < p


def test_paper_size_parameter_count_and_embedding_fraction() -> None:
    """d = 128, p = 97, one block: 13,312 embedding parameters of 224,611 (< 6%)."""
    net = gk.build(Grokking.resolve("train", {}), 1.0, 0)
    counts = {n: q.numel() for n, q in net.named_parameters()}
    assert sum(counts.values()) == 224_611
    assert sum(counts[n] for n in gk.EMBEDDINGS) == 13_312


def test_alpha_divides_exactly_the_embeddings_and_nothing_else() -> None:
    v = Grokking.resolve("train", {**CI, "dtype": "float64"})
    one = dict(gk.build(v, 1.0, 3).named_parameters())
    for alpha in (0.1, 3.0, 10.0):
        scaled = dict(gk.build(v, alpha, 3).named_parameters())
        assert scaled.keys() == one.keys()
        for name, q in scaled.items():
            if name in gk.EMBEDDINGS:
                assert torch.equal(q, one[name] / alpha), name
            else:
                assert torch.equal(q, one[name]), name
    # PyTorch's default distributions: embeddings N(0, 1), LayerNorm (1, 0), bounded uniforms
    big = dict(gk.build(Grokking.resolve("train", {"dtype": "float64"}), 1.0, 0)
               .named_parameters())
    tok = big["token_embeddings.weight"].detach().numpy()
    assert abs(tok.mean()) < 0.02 and abs(tok.std() - 1) < 0.02
    d = 128
    assert big["blocks.0.self_attn.in_proj_weight"].abs().max() <= math.sqrt(6 / (4 * d))
    assert big["blocks.0.ffn.2.weight"].abs().max() <= 1 / math.sqrt(4 * d)
    assert torch.equal(big["ln_f.weight"], torch.ones(d))
    assert torch.equal(big["blocks.0.self_attn.out_proj.bias"], torch.zeros(d))


def test_tau_multiplies_the_logits_and_divides_the_learning_rate() -> None:
    v = Grokking.resolve("train", {**CI, "dtype": "float64"})
    net = gk.build(v, 1.0, 0)
    X = torch.as_tensor(gk.modular_data(11, "x+y")[0])
    with torch.no_grad():
        base = net(X, 1.0)
        for tau in (0.5, 0.75, 1.25, 4.0):
            assert torch.allclose(net(X, tau), tau * base, rtol=1e-15, atol=0)
    for tau in (0.5, 1.5):
        opt, sched = gk.optimizer(net, 1e-3, tau, 1.0)
        lrs = []
        for _ in range(12):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        expected = [1e-3 / tau**2 * warmup_factor(k) for k in range(12)]
        np.testing.assert_allclose(lrs, expected, rtol=1e-12)
        assert lrs[0] == pytest.approx(1e-4 / tau**2) and lrs[9:] == [1e-3 / tau**2] * 3
        assert opt.param_groups[0]["betas"] == (0.9, 0.98)
        assert opt.param_groups[0]["weight_decay"] == 1.0


def test_training_matches_a_plain_pytorch_loop() -> None:
    """The model against nn.TransformerEncoderLayer (post-LN, GELU, no dropout), AdamW and
    LinearLR, written independently here; float64, τ = 1.5, α = 3."""
    alpha, tau, seed = 3.0, 1.5, 2
    common = dict(CI, steps=25, eval_every=5, dtype="float64", batch=16)
    ds = train([{"alpha": alpha, "tau": tau, "seed": seed}], **common)
    p, d = 11, 16
    X, y = gk.modular_data(p, "x+y")
    perm = rng(seed, "split").permutation(y.size)
    n = 60
    Xt, yt = torch.as_tensor(X[perm[:n]]), torch.as_tensor(y[perm[:n]])
    Xv, yv = torch.as_tensor(X[perm[n:]]), torch.as_tensor(y[perm[n:]])
    values = gk.initial_values(gk.transformer(p, d, 4, 1), rng(seed, "init"), alpha)
    tok = torch.nn.Embedding(p + 2, d).double()
    pos = torch.nn.Embedding(5, d).double()
    layer = torch.nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, activation="gelu",
                                             norm_first=False).double()
    ln = torch.nn.LayerNorm(d).double()
    head = torch.nn.Linear(d, p + 2).double()
    names = {"token_embeddings.weight": tok.weight, "position_embeddings.weight": pos.weight,
             "blocks.0.self_attn.in_proj_weight": layer.self_attn.in_proj_weight,
             "blocks.0.self_attn.in_proj_bias": layer.self_attn.in_proj_bias,
             "blocks.0.self_attn.out_proj.weight": layer.self_attn.out_proj.weight,
             "blocks.0.self_attn.out_proj.bias": layer.self_attn.out_proj.bias,
             "blocks.0.self_attn_norm.weight": layer.norm1.weight,
             "blocks.0.self_attn_norm.bias": layer.norm1.bias,
             "blocks.0.ffn.0.weight": layer.linear1.weight,
             "blocks.0.ffn.0.bias": layer.linear1.bias,
             "blocks.0.ffn.2.weight": layer.linear2.weight,
             "blocks.0.ffn.2.bias": layer.linear2.bias,
             "blocks.0.ffn_norm.weight": layer.norm2.weight,
             "blocks.0.ffn_norm.bias": layer.norm2.bias,
             "ln_f.weight": ln.weight, "ln_f.bias": ln.bias,
             "head.weight": head.weight, "head.bias": head.bias}
    assert set(names) == set(values)
    with torch.no_grad():
        for k, prm in names.items():
            prm.copy_(torch.as_tensor(values[k]))
    mask = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64)

    def f(tokens: torch.Tensor) -> torch.Tensor:
        h = (tok(tokens) + pos.weight[:4]).transpose(0, 1)
        return head(ln(layer(h, src_mask=mask)[-1])) * tau

    params = list(names.values())
    opt = torch.optim.AdamW(params, lr=1e-3 / tau**2, betas=(0.9, 0.98), weight_decay=1.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 0.1 + 0.9 * min(k, 9) / 9)
    g = rng(seed, "batches")
    losses, val_acc = [], []

    def record() -> None:
        with torch.no_grad():
            losses.append(float(torch.nn.functional.cross_entropy(f(Xt), yt)))
            val_acc.append(float((f(Xv).argmax(1) == yv).double().mean()))

    record()
    step = 0
    while step < 25:
        order = torch.as_tensor(g.permutation(n))
        for b0 in range(0, n, 16):
            idx = order[b0:b0 + 16]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(f(Xt[idx]), yt[idx]).backward()
            opt.step()
            sched.step()
            step += 1
            if step % 5 == 0:
                record()
            if step == 25:
                break
    assert ds.eval_step.values.tolist() == [0, 5, 10, 15, 20, 25]
    np.testing.assert_allclose(ds.train_loss.values[0], losses, rtol=1e-9)
    np.testing.assert_array_equal(ds.val_acc.values[0], val_acc)
    assert losses[-1] < 0.9 * losses[0]  # it trains


def test_shapes_censoring_and_chunk_mates_at_ci_size() -> None:
    pts = [{"alpha": a, "tau": t, "seed": s} for a, t, s in
           [(1.0, 1.0, 0), (10.0, 1.0, 0), (0.3, 0.5, 1)]]
    ds = train(pts, **CI)
    E = 200 // 20 + 1
    for name in ("train_acc", "val_acc", "train_loss", "val_loss"):
        assert ds[name].dims == ("point", "eval_step") and ds[name].shape == (3, E)
    assert ds.eval_step.values.tolist() == list(range(0, 201, 20))
    assert ds.attrs["n_train"] == 60 and ds.attrs["n_val"] == 61
    assert ds.attrs["batch_used"] == 61  # min(512, ceil(121 / 2)): full batch
    for tag in ("train", "val"):
        acc = ds[f"{tag}_acc"].values
        s, c = ds[f"steps_to_{tag}"].values, ds[f"censored_{tag}"].values
        for i in range(3):
            hit = np.flatnonzero(acc[i] >= 0.99)
            if hit.size:
                assert s[i] == ds.eval_step.values[hit[0]] and c[i] == 0
            else:
                assert math.isnan(s[i]) and c[i] == 1
        assert "censored" in ds[f"steps_to_{tag}"].attrs["nan_meaning"]
    # at this size the training set is memorised within the budget at alpha = 1
    assert ds.train_acc.values[0, -1] >= 0.9 > ds.train_acc.values[0, 0]
    # a point does not depend on its chunk-mates
    alone = train([pts[2]], **CI)
    for name in ("train_acc", "val_acc", "train_loss", "val_loss"):
        assert np.array_equal(alone[name].values[0], ds[name].values[2])


def test_first_reached_and_early_stop() -> None:
    ev = np.array([0, 10, 20, 30])
    acc = np.array([[0.1, 0.995, 0.98, 1.0], [0.1, 0.2, 0.3, np.nan], [1.0, 1.0, 1.0, 1.0]])
    s, c = gk.first_reached(acc, ev, 0.99)
    assert np.array_equal(s, [10.0, np.nan, 0.0], equal_nan=True)
    assert c.tolist() == [False, True, False]
    ds = train([{"seed": 0}], **{**CI, "threshold": 0.01, "early_stop": True})
    tr, va = ds.train_acc.values[0], ds.val_acc.values[0]
    both = np.flatnonzero((np.nan_to_num(tr) >= 0.01) & (np.nan_to_num(va) >= 0.01))
    stop = int(both[0])
    assert stop < ds.eval_step.size - 1  # one right answer of 60 (61) is reached early
    assert np.all(np.isfinite(tr[:stop + 1])) and np.all(np.isnan(tr[stop + 1:]))
    assert ds.steps_to_val.values[0] <= ds.eval_step.values[stop]


def bad_cases() -> list[tuple[list[str], str]]:
    g = ["train", "grokking", "-p", "steps=1", "-p", "d_model=8"]
    return [
        ([*g, "-p", "op=x/y", "-p", "p=15"], "not prime"),
        ([*g, "-p", "p=2"], "parameter p"),
        ([*g, "-p", "p=3", "-p", "train_fraction=0.05"], "0 training pairs of 9"),
        ([*g, "-p", "train_fraction=0.0001"], "0 training pairs of 9409"),
        ([*g, "-p", "train_fraction=1"], "train_fraction"),  # no validation set
        ([*g, "-p", "tau=0"], "tau"),
        ([*g, "-p", "tau=-1"], "tau"),
        ([*g, "-p", "alpha=0"], "alpha"),
        ([*g, "-p", "alpha=-2"], "alpha"),
        ([*g, "-p", "op=x^y"], "op"),
        ([*g, "-p", "n_heads=3"], "divide"),
    ]


def test_bad_inputs_exit_2_with_one_line_and_write_nothing(tmp_path: Path, cli) -> None:
    out = tmp_path / "out.h5"
    for args, phrase in bad_cases():
        assert_refused(cli, args, phrase, out)
    res = cli("sweep", "train", "grokking", "-g", "alpha=1,0", "-p", "steps=1", "-o", str(out))
    assert_one_line_error(res)
    assert not list(tmp_path.glob("out.h5*"))


@pytest.mark.system
def test_without_torch_grokking_is_listed_and_a_run_exits_2(tmp_path: Path) -> None:
    out = tmp_path / "x.h5"
    code = (
        "import contextlib, io, json, sys\n"
        "sys.modules['torch'] = None\n"
        "from richlazy_cli.cli.app import run\n"
        "res = []\n"
        "for args in (['models', '--json'], ['train', 'grokking', '-o', sys.argv[1]]):\n"
        "    o, e = io.StringIO(), io.StringIO()\n"
        "    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):\n"
        "        code = run(args)\n"
        "    res.append([code, o.getvalue(), e.getvalue()])\n"
        "print(json.dumps(res))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (c0, listing, _), (c1, _, err) = json.loads(proc.stdout.splitlines()[-1])
    assert c0 == 0 and "grokking" in {m["name"] for m in json.loads(listing)}
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert c1 == 2 and len(lines) == 1 and "richlazy[practice]" in lines[0], err
    assert not out.exists()


GRID = ["-g", "alpha=0.3,10", "-g", "tau=0.5,1", "-g", "seed=0,3", "-p", "p=11",
        "-p", "d_model=8", "-p", "n_heads=2", "-p", "steps=12", "-p", "eval_every=4"]


@pytest.mark.system
def test_sweep_is_bitwise_identical_for_any_jobs_and_chunking(tmp_path: Path, cli) -> None:
    one, two = tmp_path / "one.h5", tmp_path / "two.h5"
    r1 = cli("sweep", "train", "grokking", *GRID, "-o", one, "--jobs", "1", "-q")
    assert r1.code == 0, r1.err
    r2 = run_process("sweep", "train", "grokking", *GRID, "-o", two, "--jobs", "2",
                     "--chunk-size", "3", "-q")
    assert r2.code == 0, r2.err
    a = xr.open_dataset(one, engine="h5netcdf")
    b = xr.open_dataset(two, engine="h5netcdf")
    assert a.train_loss.dims[-1] == "eval_step" and a.train_loss.size == 8 * 4
    for name in a.data_vars:
        if name != "elapsed":
            assert np.array_equal(a[name].values, b[name].values, equal_nan=True), name
    assert a.attrs["torch_version"] == torch.__version__ and a.attrs["device"] == "cpu"
    a.close()
    b.close()


# -- the report (docs/grokking.md §5) ---------------------------------------------------------

def test_median_with_censored_runs_counted_as_the_budget() -> None:
    from richlazy_cli.report.grokking import median_censored

    nan = np.nan
    assert median_censored(np.array([100.0, 300.0, 200.0]), np.zeros(3, bool), 1e4) == (200, False)
    # one censored of three: the median is measured
    assert median_censored(np.array([100.0, nan, 200.0]), np.array([0, 1, 0], bool), 1e4) \
        == (200.0, False)
    # two of three censored: the median is the budget, censored
    assert median_censored(np.array([100.0, nan, nan]), np.array([0, 1, 1], bool), 1e4) \
        == (1e4, True)
    # a failed run (NaN, not censored) is left out
    assert median_censored(np.array([100.0, nan, 300.0]), np.zeros(3, bool), 1e4) \
        == (200.0, False)
    assert math.isnan(median_censored(np.array([nan]), np.zeros(1, bool), 1e4)[0])


@pytest.mark.system
def test_auto_report_draws_the_grokking_panel_and_heat_map(tmp_path: Path, cli) -> None:
    res = tmp_path / "grok.h5"
    r = cli("sweep", "train", "grokking", "-g", "tau=0.5,1", "-g", "alpha=0.3,10",
            "-g", "seed=0,1", "-p", "p=7", "-p", "d_model=8", "-p", "n_heads=2",
            "-p", "steps=40", "-p", "eval_every=10", "-p", "threshold=0.5",
            "-o", res, "--jobs", "1", "-q")
    assert r.code == 0, r.err
    out = tmp_path / "report"
    r = cli("report", res, "-o", out, "-q", "--var", "steps_to_val")
    assert r.code == 0, r.err
    summary = json.loads((out / "summary.json").read_text())
    figs = {f["file"]: f for f in summary["figures"] if f["kind"] == "practice"}
    assert set(figs) == {"grok-grokking-accuracy.png", "grok-grokking-steps-to-val.png"}
    for f in figs:
        assert (out / f).stat().st_size > 1000
    heat = figs["grok-grokking-steps-to-val.png"]
    assert set(heat["median_steps_to_val"]) == {"tau=0.5", "tau=1"}
    # the table is the censored median of the file's own numbers
    from richlazy_cli.report.grokking import median_censored

    ds = xr.open_dataset(res, engine="h5netcdf")
    for i, t in enumerate((0.5, 1.0)):
        for j, a in enumerate((0.3, 10.0)):
            cell = ds.sel(tau=t, alpha=a)
            m, c = median_censored(cell.steps_to_val.values, cell.censored_val.values == 1, 40)
            assert heat["median_steps_to_val"][f"tau={t:g}"][f"alpha={a:g}"] == m
            assert heat["censored_cells"][i][j] == c
    ds.close()
    assert "grokking-accuracy" in (out / "index.html").read_text()


# -- slow: the reduced protocol (jobs/grokking-reduced.toml) -----------------------------------

@pytest.mark.slow
def test_reduced_protocol_a_smaller_embedding_groks_sooner(tmp_path: Path) -> None:
    """Kunin et al. 2024 Fig. 6d/12 on the reduced protocol (p = 23, d = 64, tau = 1, 3 seeds,
    10,000 steps, alpha = 0.3, 1, 3, 10; about 30 min at load average 7-9): the median steps
    to 99% validation accuracy at alpha = 3 and at alpha = 10 is at most 0.7 of that at
    alpha = 1 (measured 0.46 and 0.39), and at alpha = 0.3 at least that at alpha = 1
    (censored runs counted as the budget). The time to 99% training accuracy varies less over
    alpha than the time to 99% validation accuracy (max/min of the medians: measured 2.3
    against 3.1). Margins ours; the measured medians are in the job file."""
    from richlazy_cli.report.grokking import median_censored

    out = tmp_path / "reduced.h5"
    res = run_process("sweep", "-c", Path(__file__).parents[3] / "jobs/grokking-reduced.toml",
                      "-g", "alpha=0.3,1,3,10", "-o", out, "--jobs", "2", "-q", timeout=3600)
    assert res.code == 0, res.err
    ds = xr.open_dataset(out, engine="h5netcdf")
    assert ds.status.values.max() == 0
    med, med_train = {}, {}
    for a in (0.3, 1.0, 3.0, 10.0):
        cell = ds.sel(alpha=a)
        med[a], _ = median_censored(cell.steps_to_val.values, cell.censored_val.values == 1,
                                    10_000)
        med_train[a], _ = median_censored(cell.steps_to_train.values,
                                          cell.censored_train.values == 1, 10_000)
    ds.close()
    assert med[1.0] < 10_000  # the protocol groks within its budget at alpha = 1
    assert med[3.0] <= 0.7 * med[1.0] and med[10.0] <= 0.7 * med[1.0], med
    assert med[0.3] >= med[1.0], med
    spread = {k: max(v.values()) / min(v.values()) for k, v in (("train", med_train),
                                                                ("val", med))}
    assert spread["train"] < spread["val"], (spread, med_train, med)


def test_at_the_evaluation_where_the_loss_diverges_the_accuracy_is_not_a_number() -> None:
    """lr = 10: the loss grows to ~10¹³ and then is NaN; at that evaluation the accuracy is
    NaN too (NaN logits predict nothing), and the point is marked diverged."""
    v = Grokking.resolve("train", dict(p=7, d_model=8, n_heads=2, steps=50, lr=10.0))
    ds = Grokking().train(Batch.from_points(Grokking, [v]))
    loss, acc = ds.train_loss.values[0], ds.train_acc.values[0]
    assert int(ds.status[0]) == 1 and np.isnan(loss).any()
    np.testing.assert_array_equal(np.isnan(acc), np.isnan(loss))
