"""Benchmark of the hermite torch flow's step loop: the step-size control on the device with one
host synchronisation per window (this tree) against the control on the host, one or more
synchronisations per step (a base commit, checked out in a temporary git worktree), in one run
on the same machine (docs/performance.md, "Hermite on a GPU").

Run: ``.venv/bin/python bench/hermite_flow.py [--base REF] [--device cpu|cuda] [--quick]``
(``REF`` defaults to the merge base with ``main``). Prints, for each tree, the attempts per
second of two workloads and the host synchronisations per attempt (calls of the
``torch.Tensor`` methods that read a value back), with the load average:

1. the public ``integrate_flow`` on the CPU path (each configuration alone, as the engine runs
   it on the CPU), B = 4 configurations of a reduced Fig. 2 problem (d = 64, P = 16, m = 16,
   ``early_stop``);
2. one batch of B = 32 configurations of the same problem integrated together on ``--device``
   (the GPU path; on the CPU it shows the cost of the control, not a GPU's).

On the CPU a synchronisation costs next to nothing, so the two trees should run alike there;
the saving this bench exists to show is on a GPU, where each one waits for the device queue.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import inspect, json, sys, time
import numpy as np, torch
from richlazy_cli.models.hermite import model as H, _torch as HT
device, B, quick, batched = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1"
calls = [0]
for name in ("cpu", "item", "tolist", "__bool__", "__float__", "__int__", "__index__"):
    method = getattr(torch.Tensor, name)
    def counted(self, *a, _m=method, **k):
        calls[0] += 1
        return _m(self, *a, **k)
    setattr(torch.Tensor, name, counted)
torch.set_num_threads(1)
m, d, P = (8, 32, 8) if quick else (16, 64, 16)
c = H.hermite_coeffs(4, None)
U0 = H.initial_directions(0, m, d)
sigma0 = np.geomspace(0.01, 0.05, B)
a = np.stack([H.teacher_weights(P, 0.8)] * B)
times = H.log_times(300.0 if quick else 1000.0, 60, 4.0)
atol = 1e-3 * 1e-7 * sigma0 / np.sqrt(d)
rec = np.isfinite(np.stack([H.greedy_recovery_times(U0[:, :P], a[b], c) for b in range(B)]))
args = (torch, sigma0[:, None, None] * U0[None], a, c, times, 1e-7, atol, H._R_FLOOR,
        H.RECOVERY, device, False)
kw = dict(early_stop=True, recoverable=rec, settle_tol=H.SETTLE_TOL)
sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
from richlazy_cli.numerics.compute import session
if "problem" in inspect.signature(HT.integrate_flow).parameters:  # one problem object
    from richlazy_cli.models.hermite._flow import HermiteFlowProblem
    problem = HermiteFlowProblem(
        V0=args[1], a=a, c=c, times=times, method="RK45", rtol=1e-7, atol=atol,
        recovery=H.RECOVERY, r_floor=H._R_FLOOR, early_stop=True, recoverable=rec,
        settle_tol=H.SETTLE_TOL)
    def run():
        with session():
            if not batched:
                return HT.integrate_flow(problem, device)
            return HT._integrate(torch, problem, device, HT.SYNC_EVERY)
else:  # a tree whose flow takes its arguments one by one
    def run():
        if not batched:
            return HT.integrate_flow(*args, **kw)
        windowed = "sync_every" in inspect.signature(HT._integrate).parameters
        extra = [HT.SYNC_EVERY] if windowed else []
        with session():
            return HT._integrate(*args, None, True, rec, H.SETTLE_TOL, *extra)
run()  # warm-up (kernels, caches)
sync()
calls[0] = 0
start = time.perf_counter()
out = run()
sync()
wall = time.perf_counter() - start
per_config = (out["nfev"] - 2) // 6
attempts = int(np.sum(per_config))
steps = int(np.max(per_config)) if batched else attempts  # solver iterations
print(json.dumps({"wall": wall, "attempts": attempts, "steps": steps, "syncs": calls[0],
                  "t_recover": np.nan_to_num(out["t_recover"], nan=-1.0).tolist()}))
"""


def measure(tree: Path, device: str, B: int, quick: bool, batched: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-c", CHILD, device, str(B), "1" if quick else "0",
                          "1" if batched else "0"], env=env, cwd=tree, capture_output=True,
                         text=True, check=False)
    if res.returncode != 0:
        sys.exit(f"bench child failed in {tree}:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default=None, help="git ref of the host-side control")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--quick", action="store_true")
    opts = ap.parse_args()
    git = ["git", "-C", str(ROOT)]
    base = opts.base or subprocess.run([*git, "merge-base", "HEAD", "main"], check=True,
                                       capture_output=True, text=True).stdout.strip()
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"({os.cpu_count()} cores); base {base[:10]}, device {opts.device}")
    with tempfile.TemporaryDirectory() as tmp:
        wt = Path(tmp) / "base"
        subprocess.run([*git, "worktree", "add", "--detach", "-q", str(wt), base], check=True)
        try:
            for label, B, batched in (("CPU path, each configuration alone", 4, False),
                                      (f"one batch on {opts.device}", 32, True)):
                if opts.quick:
                    B = max(2, B // 4)
                before = measure(wt, opts.device, B, opts.quick, batched)
                after = measure(ROOT, opts.device, B, opts.quick, batched)
                t0, t1 = np.array(before["t_recover"]), np.array(after["t_recover"])
                diff = float(np.max(np.abs(t1 - t0) / np.maximum(np.abs(t0), 1e-300)))
                print(f"{label}, B = {B}:")
                for name, r in (("host control (base)", before), ("device control", after)):
                    print(f"  {name:<20} {r['attempts'] / r['wall']:>9.1f} configuration-"
                          f"attempts/s  {r['syncs'] / r['steps']:>6.3f} syncs/step  "
                          f"({r['attempts']} attempts in {r['steps']} steps, {r['wall']:.2f} s)")
                ratio = (after["attempts"] / after["wall"]) / (before["attempts"] / before["wall"])
                fell = (before["syncs"] / before["steps"]) / (after["syncs"] / after["steps"])
                print(f"  speed ratio device/host {ratio:.2f}; syncs per step fell {fell:.1f}x "
                      f"(those left: records, brentq of recovery times); t_recover max "
                      f"relative change {diff:.1e}")
        finally:
            subprocess.run([*git, "worktree", "remove", "--force", str(wt)], check=False)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
