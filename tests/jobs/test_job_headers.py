"""Every job file opens with a header a user can read as the product's label: what it runs,
how it differs from the paper, the measured result and the wall time with the machine it was
measured on, one line each and in that order; then at most commands to run (`# Run:`,
`# Report:`), what it needs (`# Needs:`) and where the docs say more (`# See docs/...`).
Nothing else: no dates, no load averages, no lab notes (measurements with dates belong in the
generated tables of docs/estimates.md, evidence in docs/claims.md and the family pages)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JOBS = sorted((ROOT / "jobs").glob("*.toml")) + sorted((ROOT / "jobs" / "paper").glob("*.toml"))

FIRST = ("Runs", "Differs from the paper", "Measured", "Wall time")
EXTRA = re.compile(r"(Run|Report|Needs): \S.*|See docs/\S+\.md\b.*")
MACHINE = re.compile(r"2-core AMD EPYC|NVIDIA [HA]\d+|GPU")
DATE = re.compile(r"20\d\d-\d\d-\d\d")
LOAD = re.compile(r"load (average|\d)", re.IGNORECASE)
MAX_LEN = 120


def header(path: Path) -> list[str]:
    """The job file's leading comment lines, without the `# `."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        out.append(line[1:].strip())
    return out


def problems(path: Path) -> list[str]:
    """What is wrong with the file's header, one phrase each (empty: none)."""
    lines = header(path)
    found = []
    for i, label in enumerate(FIRST):
        if i >= len(lines) or not re.fullmatch(rf"{label}: \S.*", lines[i]):
            found.append(f"line {i + 1} is not '# {label}: ...': {lines[i:i + 1]}")
    if len(lines) >= 4 and not MACHINE.search(lines[3]):
        found.append(f"the wall time names no machine kind: {lines[3]!r}")
    found += [f"an extra line of no allowed kind: {line!r}" for line in lines[4:]
              if not EXTRA.fullmatch(line)]
    found += [f"a date: {line!r}" for line in lines if DATE.search(line)]
    found += [f"a load average: {line!r}" for line in lines if LOAD.search(line)]
    found += [f"longer than {MAX_LEN} characters: {line!r}" for line in lines
              if len(line) + 2 > MAX_LEN]
    return found


def test_every_job_file_is_checked() -> None:
    assert len(JOBS) >= 50


@pytest.mark.parametrize("job", JOBS,
                         ids=lambda p: str(p.relative_to(ROOT / "jobs")))
def test_job_header_has_the_four_lines_and_nothing_else(job: Path) -> None:
    assert problems(job) == []


def test_the_check_fails_on_a_broken_header(tmp_path: Path) -> None:
    good = ("# Runs: a\n# Differs from the paper: b\n# Measured: c\n"
            "# Wall time: 3 s (--jobs 2, 2-core AMD EPYC)\n# See docs/usage.md\nx = 1\n")
    cases = {
        "good": good,
        "no measured": good.replace("# Measured: c\n", ""),
        "order": good.replace("# Runs: a\n# Differs from the paper: b\n",
                              "# Differs from the paper: b\n# Runs: a\n"),
        "wrapped": good.replace("# Measured: c\n", "# Measured: c\n#   continued\n"),
        "no machine": good.replace(" (--jobs 2, 2-core AMD EPYC)", ""),
        "history": good.replace("x = 1", "# Before the fix it said 5 s.\nx = 1"),
        "date": good.replace("3 s", "3 s on 2026-12-02"),
        "load": good.replace("3 s", "3 s at load 2.5"),
        "long": good.replace("# Runs: a", "# Runs: " + "a" * 120),
    }
    found = {}
    for name, text in cases.items():
        (tmp_path / f"{name}.toml").write_text(text, encoding="utf-8")
        found[name] = problems(tmp_path / f"{name}.toml")
    assert found["good"] == []
    assert all(found[name] for name in cases if name != "good"), found
