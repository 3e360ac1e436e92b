"""The dry run's estimate against the measured wall time (docs/estimates.md).

The fast tests check the measured terms the estimate adds to its probe
(:mod:`richlazy_cli.engine.startup`): the CPU share workers get on a loaded machine, against
the fair-share arithmetic done by hand; the process age the command's start is read from. The
slow test runs the job files cheap enough for the test suite, each as a separate process after
its own dry run, and asserts the estimate within 2x of the measured wall time (the target of
docs/estimates.md; bench/estimates.py measures every job file).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from richlazy_cli.engine import startup

ROOT = Path(__file__).resolve().parents[2]
CHEAP_JOBS = ("single-neuron-delta", "fig7", "fig8", "azulay-fc", "linear-delta")
"""Job files whose sweep takes a few seconds on 2 cores (start-up, writing and all)."""


def test_speedup_on_a_saturated_machine_is_the_fair_share(monkeypatch) -> None:
    """No core idle and the probe got half of its runnable time: on 2 cores the others demand
    2 / 0.5 - 1 = 3 cores; 2 workers then get 2 * 2 / (3 + 2) = 0.8 cores, 1.6 probes."""
    monkeypatch.setattr(startup, "cores", lambda: 2)
    monkeypatch.setattr(startup, "autogroups", lambda: False)
    share = startup.CpuShare(share=0.5, idle=0.0)
    assert share.others() == pytest.approx(3.0)
    assert share.speedup(2) == pytest.approx(0.8 / 0.5)
    assert share.speedup(1) == pytest.approx(1.0)  # one worker: the probe's own speed


def test_speedup_on_a_quiet_machine_is_the_worker_count(monkeypatch) -> None:
    """The probe alone on one of 2 cores (the other idle): the workers get a core each."""
    monkeypatch.setattr(startup, "cores", lambda: 2)
    monkeypatch.setattr(startup, "autogroups", lambda: False)
    quiet = startup.CpuShare(share=1.0, idle=0.5)
    assert quiet.others() == pytest.approx(0.0)
    assert quiet.speedup(2) == pytest.approx(2.0)
    assert quiet.speedup(4) == pytest.approx(2.0)  # never more than the cores
    busy = startup.CpuShare(share=1.0, idle=0.25)  # half a core busy with something else
    assert busy.speedup(2) == pytest.approx(2 * 2 / (0.5 + 2))


def test_speedup_under_session_groups_is_the_probes_share_plus_the_idle_cores(
        monkeypatch) -> None:
    """With the kernel's session groups the workers are one group with the command: on a
    saturated machine two workers get together what the probe got (1 probe); with a quarter
    of the 2 cores idle, the probe's full core and that half core (1.5 probes); on a quiet
    machine, a core each."""
    monkeypatch.setattr(startup, "cores", lambda: 2)
    monkeypatch.setattr(startup, "autogroups", lambda: True)
    assert startup.CpuShare(share=0.4, idle=0.0).speedup(2) == pytest.approx(1.0)
    assert startup.CpuShare(share=1.0, idle=0.25).speedup(2) == pytest.approx(1.5)
    assert startup.CpuShare(share=1.0, idle=0.5).speedup(2) == pytest.approx(2.0)
    assert startup.CpuShare(share=1.0, idle=0.5).speedup(4) == pytest.approx(2.0)


def test_cpu_share_measures_a_sleep_as_a_free_core() -> None:
    """A block that sleeps was never kept waiting for a CPU: its share is 1, so a probe that
    waits (a sleep, a GPU) is not taken for a starved one."""
    with startup.CpuShare() as share:
        time.sleep(0.2)
    assert share.share is not None and share.share > 0.5
    assert share.idle is not None and 0.0 <= share.idle <= 1.0


@pytest.mark.system
def test_process_age_is_the_time_since_the_process_started() -> None:
    code = ("import time; time.sleep(0.5); from richlazy_cli.engine.startup import "
            "process_age; print(process_age())")
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    wall = time.perf_counter() - start
    assert 0.5 <= float(out) <= wall + 0.05


def test_the_final_write_is_priced_by_the_results_bytes(monkeypatch, tmp_path: Path,
                                                        cli) -> None:
    """A dry run prices the final write as ``WRITE_SECONDS`` plus the result's declared bytes
    at ``WRITE_BYTES_PER_SECOND`` (engine/startup.py), divided by the share of a core its
    probe got, added to the command's start; nothing is written. Checked against the
    arithmetic done here on the declared size the dry run prints, for one point and for 100,
    on a free core and on half of one."""
    monkeypatch.setattr(startup, "command_startup", lambda model: 1.25)
    got = {"share": 1.0}

    def measured(self: startup.CpuShare, *exc: object) -> None:  # the probe's share, set
        self.share, self.idle = got["share"], None

    monkeypatch.setattr(startup.CpuShare, "__exit__", measured)
    assert startup.final_write(0) == startup.WRITE_SECONDS
    assert startup.final_write(2e6) == pytest.approx(
        startup.WRITE_SECONDS + 2e6 / startup.WRITE_BYTES_PER_SECOND)
    priced = {}
    for grid, share in (("delta=1", 1.0), ("delta=linspace(-1,1,100)", 1.0), ("delta=1", 0.5)):
        got["share"] = share
        out = tmp_path / "x.h5"
        dry = cli("sweep", "solve", "single-neuron", "-g", grid, "-p", "method=exact",
                  "-o", out, "--jobs", "1", "--dry-run", "--json")
        assert dry.code == 0, dry.err
        summary = json.loads(dry.out)
        total = summary["output_bytes"]["total"]
        write = startup.WRITE_SECONDS + total / startup.WRITE_BYTES_PER_SECOND
        assert summary["estimate"]["startup_seconds"] == pytest.approx(1.25 + write / share,
                                                                       rel=1e-12)
        assert not out.exists()
        priced[grid, share] = (total, summary["estimate"]["startup_seconds"])
    (one, one_price), (many, many_price), (_, loaded) = priced.values()
    assert many == pytest.approx(100 * one)  # the same declared bytes a point
    assert many_price - one_price == pytest.approx(
        (many - one) / startup.WRITE_BYTES_PER_SECOND)
    assert loaded - 1.25 == pytest.approx(2 * (one_price - 1.25))


@pytest.mark.slow
@pytest.mark.parametrize("name", CHEAP_JOBS)
def test_estimate_within_2x_of_the_measured_time(name: str, tmp_path: Path) -> None:
    job, out = ROOT / "jobs" / f"{name}.toml", tmp_path / "out.h5"
    command = [sys.executable, "-m", "richlazy_cli", "sweep", "-c", str(job), "-o", str(out),
               "--jobs", "2"]
    dry = subprocess.run([*command, "--dry-run", "--json"], capture_output=True, text=True,
                         cwd=ROOT, timeout=600)
    assert dry.returncode == 0, dry.stderr
    estimate = json.loads(dry.stdout)["estimate"]["wall_seconds"]
    start = time.perf_counter()
    run = subprocess.run([*command, "-q"], capture_output=True, text=True, cwd=ROOT,
                         timeout=600)
    measured = time.perf_counter() - start
    assert run.returncode == 0, run.stderr
    assert 0.5 <= estimate / measured <= 2.0, (estimate, measured)


def _values(model: str, **given: object) -> dict[str, object]:
    from richlazy_cli.models.base import get_model

    cls = get_model(model)
    values = {p.name: p.default for p in cls.params}
    values.update(given)
    return values


def test_two_layer_probe_keeps_the_runs_mix_of_steps_and_checkpoints() -> None:
    """fig1a's run: 10⁶ steps of a tiny network, 101 log-spaced checkpoints (most of them in
    the first 200 steps). Its probe: one GFLOP of steps (4 n d h each), with the checkpoints
    thinned to the run's density (at least the first and the last), evenly spaced."""
    from richlazy_cli.models.two_layer.model import PROBE_GFLOP, TwoLayer, checkpoint_steps

    run = _values("two-layer", d=2, h=50, n=20, n_test=10000, steps=1_000_000,
                  n_records=101)
    probe = TwoLayer._probe(run)
    steps = int(probe["steps"])
    assert steps == math.ceil(PROBE_GFLOP / (4 * 20 * 2 * 50 / 1e9))
    ck = checkpoint_steps(steps, int(probe["n_records"]), probe["records"])
    run_ck = checkpoint_steps(1_000_000, 101, None)
    assert ck[0] == 0 and ck[-1] == steps
    assert len(ck) == max(2, round(len(run_ck) * steps / 1_000_000))
    big = _values("two-layer", d=100, h=50, n=1000, steps=10000, n_records=21)
    assert TwoLayer._probe(big)["steps"] == 200  # at least 200 steps


def test_cnn_probe_runs_a_tenth_of_the_epochs_with_a_tenth_of_the_checkpoints() -> None:
    from richlazy_cli.models.cnn.model import CNN, _checkpoints
    from richlazy_cli.practice.data import TRAIN_SIZES

    run = _values("cnn", dataset="digits", epochs=200, first_steps=10, batch=512)
    probe = CNN._probe(run)
    assert probe["epochs"] == 20 and probe["first_steps"] == 0
    n = TRAIN_SIZES["digits"]
    run_ck, probe_ck = _checkpoints(run, n).size, _checkpoints(probe, n).size
    assert probe_ck == max(2, round(run_ck * 20 / 200))
    assert CNN._probe({**run, "epochs": 2}) == {**run, "epochs": 2}  # short runs: unchanged


def test_split_setup_is_the_line_through_two_probes() -> None:
    from richlazy_cli.engine.estimation import split_setup

    assert split_setup(2.0, 1.0, 5.0, 4.0) == pytest.approx((1.0, 1.0))
    assert split_setup(1.0, 1.0, 3.0, 3.0) == pytest.approx((0.0, 1.0))
    assert split_setup(2.0, 1.0, 2.5, 1.0) is None  # costs not increasing
    assert split_setup(2.0, 1.0, 1.5, 4.0) is None  # the costlier probe faster
    assert split_setup(1.0, 1.0, 9.0, 3.0) is None  # the set-up would be negative


def test_makespan_hands_chunks_in_order_to_the_first_free_worker() -> None:
    from richlazy_cli.engine.estimation import makespan

    assert makespan([1.0, 1.0, 1.0, 1.0], 2) == pytest.approx(2.0)
    assert makespan([5.0, 1.0, 1.0], 2) == pytest.approx(5.0)
    assert makespan([1.0, 1.0, 5.0], 2) == pytest.approx(6.0)  # the costly one comes last
    assert makespan([1.0, 2.0, 3.0], 1) == pytest.approx(6.0)


def _stability(method: str, z: float) -> float:
    """|R(z)| of scipy's explicit Runge-Kutta ``method`` from its Butcher tableau:
    ``R(z) = 1 + z bᵀ (I - z A)⁻¹ 1``."""
    from scipy.integrate import DOP853, RK45

    cls = {"RK45": RK45, "DOP853": DOP853}[method]
    b = np.asarray(cls.B, dtype=float)
    n = b.size
    A = np.zeros((n, n))
    given = np.asarray(cls.A, dtype=float)[:n, :n]
    A[: given.shape[0], : given.shape[1]] = given
    return abs(1.0 + z * b @ np.linalg.solve(np.eye(n) - z * A, np.ones(n)))


@pytest.mark.parametrize("method", ["RK45", "DOP853"])
def test_stability_interval_is_the_edge_of_the_integrators_stability(method: str) -> None:
    """Independently of the constant: |R| ≤ 1 just inside the stated edge, > 1 just outside,
    and ≤ 1 on a grid of the interval."""
    from richlazy_cli.models.hermite.model import STABILITY_INTERVAL

    edge = STABILITY_INTERVAL[method]
    assert _stability(method, -0.999 * edge) <= 1.0 < _stability(method, -1.001 * edge)
    assert all(_stability(method, -z) <= 1.0 + 1e-12 for z in np.linspace(0.01, 0.998 * edge, 200))


def test_hermite_solve_cost_prices_the_flow_alone() -> None:
    """A flow's cost does not depend on SGD's steps or loop, an SGD run's not on t_max."""
    from richlazy_cli.models.hermite.model import Hermite

    solve = _values("hermite", d=32, P=4, m=8, t_max=300.0)
    assert Hermite._cost(solve, "solve") == Hermite._cost({**solve, "steps": 10 * solve["steps"]},
                                                          "solve")
    train = _values("hermite", d=32, P=4, m=8, lr=1e-3, implementation="numba")
    assert Hermite._cost(train, "train") == Hermite._cost({**train, "t_max": 10 * train["t_max"]},
                                                          "train")


def _solve(**given: object) -> tuple[dict[str, object], object]:
    from richlazy_cli.engine.job import Job
    from richlazy_cli.models.base import Batch

    job = Job.build("hermite", "solve", {"n_records": 20, **given})
    values = job.values(0)
    return values, job.model().solve(Batch.from_points(job.model, [values]))


@pytest.mark.parametrize("given", [
    {"d": 64, "P": 8, "m": 4, "t_max": 500.0},  # runs to t_max: the stable rate of a_p
    {"d": 64, "P": 8, "m": 16, "t_max": 800.0, "early_stop": True},  # m ≥ 2P: stops
], ids=["to-t_max", "early-stop"])
def test_hermite_step_count_model_against_a_measured_solve(given: dict[str, object]) -> None:
    """The step-count model's evaluations against RK45's counted ones (``nfev``) on small
    flows: within 1.5× (measured 1.11 and 1.17; the job files' flows 0.73–1.12 where the
    flow does what the model prices, docs/estimates.md)."""
    from richlazy_cli.models.hermite.model import expected_evaluations

    values, ds = _solve(**given)
    ratio = expected_evaluations(values) / int(ds["nfev"].values[0])
    assert 1 / 1.5 <= ratio <= 1.5, ratio


def test_hermite_result_cost_counts_the_evaluations_done() -> None:
    """The probe is priced by what it did: (nfev + output times) evaluations, each
    ``m² d + 160 m d + 1.3·10⁶`` (the fitted work of one evaluation)."""
    from richlazy_cli.models.hermite.model import Hermite

    values, ds = _solve(d=32, P=4, m=8, t_max=20.0)
    nfev = int(ds["nfev"].values[0])
    assert nfev > 0
    assert Hermite._result_cost(values, ds) == pytest.approx(
        (nfev + 21) * (8 * 8 * 32 + 160 * 8 * 32 + 1.3e6) * 1e-9)
    from richlazy_cli.models.base import Batch

    for implementation in ("numba", "numpy"):  # a train counts no evaluations
        train = Hermite.resolve("train", {"d": 32, "P": 4, "m": 8, "steps": 20, "n_records": 3,
                                          "implementation": implementation})
        trained = Hermite().train(Batch.from_points(Hermite, [train]))
        assert Hermite._result_cost(train, trained) is None


@pytest.mark.parametrize(("m", "d", "P"), [(64, 2048, 1024), (256, 512, 256), (8, 128, 32)])
def test_hermite_evaluation_work_leads_with_the_products_the_gradient_computes(
        m: int, d: int, P: int) -> None:
    """The work unit of one evaluation, ``m² d``, is what the gradient's matrix products do,
    counted by torch's FLOP counter on the one definition of the gradient: 2 products of
    ``m² d`` multiply-adds (4 m² d FLOP), the rest (the overlaps with the P teachers, the
    quadratic form) under 5% — nothing of order ``m P d``, which the former unit
    ``m (m + P) d`` priced (4.2× the products at m = 64, P = 1024, d = 2048)."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    from richlazy_cli.models.hermite._population import population_loss_grad
    from richlazy_cli.models.hermite.model import evaluation_work, hermite_coeffs

    gen = torch.Generator().manual_seed(0)
    V = torch.randn(m, d, dtype=torch.float64, generator=gen)
    a = torch.rand(P, dtype=torch.float64, generator=gen)
    with FlopCounterMode(display=False) as counter:
        population_loss_grad(V, a, hermite_coeffs(4, None))
    products = counter.get_total_flops() / 4  # in units of m² d multiply-adds, twice
    assert m * m * d <= products <= 1.05 * m * m * d
    assert products <= evaluation_work(m, d) <= products + 170 * m * d + 1.3e6


def test_rhm_cost_prices_each_step_and_each_evaluated_row_as_a_run_counts_them(
        monkeypatch) -> None:
    """rhm's cost is its mini-batch steps, each its products plus a step's fixed work
    (``STEP_OVERHEAD``), and the rows its full-set evaluations forward, each ``2 macs``. Both
    counts are taken from a training run here (its gradient computations and the rows handed
    to the evaluations), not from the formula. Priced by products alone, the steps of a small
    network were a quarter of their time against the evaluations' (docs/estimates.md, "rhm's
    training steps"): the dry run then scaled an evaluation-bound probe (the smallest
    training set, the 20,000 test rows) to training-bound runs, 0.44 of the measured time."""
    torch = pytest.importorskip("torch")
    from richlazy_cli.models.rhm import model as rhm

    values = {**_values("rhm", L=2, width=16, epochs=4, test_size=100, batch=8,
                        train_fraction=0.3, n_records=3, schedule="constant"), "lr": None}
    steps = [0]
    rows = [0]
    grad, evaluate, accuracy = torch.autograd.grad, rhm.evaluate, rhm.accuracy

    def counted_grad(*args, **kwargs):
        steps[0] += 1
        return grad(*args, **kwargs)

    def rows_of(fn):
        def counted(forward, params, X, y):
            rows[0] += int(X.shape[0])
            return fn(forward, params, X, y)
        return counted

    monkeypatch.setattr(torch.autograd, "grad", counted_grad)
    monkeypatch.setattr(rhm, "evaluate", rows_of(evaluate))
    monkeypatch.setattr(rhm, "accuracy", rows_of(accuracy))
    problem = rhm._Problem(values, 0)
    n_train = math.floor(0.3 * problem.P)
    ck = rhm.checkpoint_epochs(4, 3)
    rhm._train_group([problem], values, [1.0], n_train, ck, "cpu")
    d = 2**2 * 8
    macs = d * 16 + 2 * 16 * 16 + 16 * 8
    assert steps[0] == math.ceil(n_train / 8) * 4
    assert rows[0] == ck.size * (n_train + 100)
    counted = (6 * macs * n_train * 4 + rhm.STEP_OVERHEAD * steps[0] + 2 * macs * rows[0]) / 1e9
    assert rhm.RHM._cost(values) == pytest.approx(counted, rel=1e-12)
    # cosine_clamped skips the epochs of learning rate 0 (the last 20%): no step there
    clamped = {**values, "schedule": "cosine_clamped", "epochs": 10, "n_records": 2}
    steps[0] = 0
    rhm._train_group([problem], clamped, [1.0], n_train, rhm.checkpoint_epochs(10, 2), "cpu")
    assert steps[0] == math.ceil(n_train / 8) * 8
    assert rhm._work(clamped)[1] == steps[0]


def test_rhm_probe_runs_a_tenth_of_the_epochs_with_the_runs_density_of_evaluations() -> None:
    from richlazy_cli.models.rhm.model import RHM, checkpoint_epochs

    run = _values("rhm", epochs=250, n_records=26)
    probe = RHM._probe(run)
    assert probe["epochs"] == 25
    runs = checkpoint_epochs(250, 26).size
    probes = checkpoint_epochs(25, probe["n_records"]).size
    assert probe["n_records"] == max(3, round(runs * 25 / 250))
    assert probes == 3  # the fewest the record grid holds: epochs 0, 1 and the last
    assert RHM._probe({**run, "epochs": 2})["epochs"] == 2  # short runs keep their epochs


@pytest.mark.system
def test_grokking_early_stop_is_priced_at_its_share_with_the_bound_beside_it(
        tmp_path: Path, cli) -> None:
    """grokking's ``early_stop`` ends a run at an accuracy no theory predicts, while its cost
    counts the whole budget: the footprint declares the stop and its expected share of the
    budget, :data:`DECAY_TIMES_TO_STOP` weight-decay time scales ``τ²/(lr λ)`` (at most the
    budget), and the dry run prices the points at that share of their cost, with the phrase
    and the bound of no early stop beside it (text and JSON); without ``early_stop`` the
    whole cost is priced and no bound is given."""
    pytest.importorskip("torch")
    from richlazy_cli.engine.estimation import Estimate
    from richlazy_cli.models.grokking.model import DECAY_TIMES_TO_STOP, Grokking

    stopping = _values("grokking", early_stop=True, steps=10000, threshold=0.99, lr=1e-3,
                       weight_decay=1.0, tau=1.0)
    footprint = Grokking.footprint("train", stopping)
    assert "early_stop" in str(footprint.stops_early)
    # 1/(η λ) = 1000 steps: 5.5 of them, of the 10,000-step budget
    assert DECAY_TIMES_TO_STOP == 5.5 and footprint.stop_share == pytest.approx(0.55)
    assert footprint.expected_cost == pytest.approx(0.55 * footprint.cost)
    step4 = Grokking.footprint("train", {**stopping, "tau": 0.5})  # η = 4e-3: 250 steps
    assert step4.stop_share == pytest.approx(5.5 * 250 / 10000)
    short = Grokking.footprint("train", {**stopping, "steps": 2000})  # 5,500 > the budget
    assert short.stop_share == 1.0 and short.expected_cost == short.cost
    assert Grokking.footprint("train", {**stopping, "weight_decay": 0.0}).stop_share == 1.0
    running = Grokking.footprint("train", {**stopping, "early_stop": False})
    assert running.stops_early is None and running.stop_share == 1.0
    assert running.expected_cost == running.cost == footprint.cost
    line = Estimate(30.0, 1.0, 1, 1, stops_early="x", bound_seconds=60.0).describe()
    assert line.startswith("≈ 30 s on 1 worker (x; ≤ 60 s if none stops early)")
    assert Estimate(30.0, 1.0, 1, 1, compile_seconds=2.0, startup_seconds=3.0,
                    bound_seconds=60.0).bound_wall_seconds == 65.0
    # lr 0.5: 1/(η λ) = 2 steps, so a stop expected at 11 of the 40 (a share of 0.275)
    args = ["sweep", "train", "grokking", "-p", "p=7", "-p", "d_model=8", "-p", "n_heads=2",
            "-p", "steps=40", "-p", "lr=0.5", "-g", "seed=range(2)", "-o", tmp_path / "g.h5",
            "--jobs", "1", "--dry-run"]
    text = cli(*args, "-p", "early_stop=true")
    assert text.code == 0, text.err
    line = next(x for x in text.out.splitlines() if x.startswith("estimated time:"))
    assert line.startswith("estimated time: ≈ ")
    assert "runs stop early at early_stop" in line and "weight decay's time scale" in line
    assert "if none stops early" in line
    priced = json.loads(cli(*args, "-p", "early_stop=true", "--json").out)["estimate"]
    assert "early_stop" in priced["stops_early"]
    once = priced["compile_seconds"] + priced["startup_seconds"]
    # the computation at 0.275 of the points' cost: at least that share of the bound's (a
    # set-up per point is not shortened) and below it
    ratio = priced["seconds"] / (priced["bound_wall_seconds"] - once)
    assert 0.275 * (1 - 1e-9) <= ratio < 0.9
    plain = json.loads(cli(*args, "--json").out)["estimate"]
    assert plain["stops_early"] is None and plain["bound_wall_seconds"] is None
    assert not (tmp_path / "g.h5").exists()
