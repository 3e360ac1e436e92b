"""Every shell block of README.md and docs/*.md runs in the test suite or says why it does not.

A fenced block whose language is ``sh``, ``bash``, ``console`` or ``shell`` is, by the HTML
comment on the line before it, one of:

* ``<!-- not run: REASON -->``: not run, for the reason given (a GPU, a cluster, the suite
  itself);
* ``<!-- run by: tests/FILE.py::TEST -->``: run by that test (the README's tour, the crontab
  line of docs/cluster.md, the SLURM blocks); the test must exist, and a block that talks to
  SLURM must be run by a test marked ``slurm``;
* ``<!-- run: slow -->``: run here, in the slow tier (``make test-slow``);
* nothing: run here, in the fast tier (each such block takes a few seconds at most).

Blocks run here run in bash (``set -e``) in a fresh folder holding what a clone holds after
``make demo`` (``.venv``, ``jobs/``, ``examples/``, an empty ``results/``), with ``.venv/bin``
first on ``PATH`` and this checkout's code on ``PYTHONPATH``.

Every fenced block must name its language, so that a shell block cannot pass unlabelled.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHELL = ("sh", "bash", "console", "shell")
FENCE = re.compile(r"^ *```(\S*)[^\n]*\n(.*?)^ *```[ \t]*$", re.S | re.M)
MARK = re.compile(r"<!--\s*(not run|run by|run):?\s*(.*?)\s*-->\s*$")
SLURM_WORDS = ("sbatch", "srun", "submit.sh", "--scheduler slurm", "--shard slurm", "squeue")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    body: str
    mark: str  # "", "not run", "run by" or "run"
    detail: str

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a page, with the mark on the line before each."""
    text = path.read_text()
    found = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = MARK.search(before)
        page = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        found.append(Block(page, line, match.group(1), match.group(2),
                           mark.group(1) if mark else "", mark.group(2) if mark else ""))
    return found


def shell_blocks() -> list[Block]:
    return [b for p in pages() for b in blocks(p) if b.language in SHELL]


def test_the_reader_finds_blocks_and_marks(tmp_path) -> None:
    page = tmp_path / "page.md"
    page.write_text("text\n\n<!-- not run: needs a GPU -->\n```sh\nnvidia-smi\n```\n\n"
                    "```python\nx = 1\n```\n\n```sh\nrichlazy --version\n```\n")
    found = blocks(page)
    assert [(b.language, b.mark, b.detail, b.body) for b in found] == [
        ("sh", "not run", "needs a GPU", "nvidia-smi\n"), ("python", "", "", "x = 1\n"),
        ("sh", "", "", "richlazy --version\n")]


def test_every_block_names_its_language() -> None:
    unlabelled = [b.name for p in pages() for b in blocks(p) if not b.language]
    assert unlabelled == [], f"fenced blocks without a language: {unlabelled}"


def test_every_shell_block_is_run_or_says_why_not() -> None:
    found = shell_blocks()
    assert any(b.page == "README.md" and b.mark == "run by" for b in found)  # the tour
    assert any(b.mark == "" for b in found)  # and at least one block runs here
    problems = []
    for block in found:
        if block.mark == "not run" and not block.detail:
            problems.append(f"{block.name}: 'not run' gives no reason")
        if block.mark == "run" and block.detail != "slow":
            problems.append(f"{block.name}: unknown mark 'run: {block.detail}'")
        slurm = any(word in block.body for word in SLURM_WORDS)
        if block.mark == "run by":
            file, _, test = block.detail.partition("::")
            path = ROOT / file
            if not path.is_file() or not test or f"def {test}(" not in path.read_text():
                problems.append(f"{block.name}: no test {block.detail}")
            elif slurm and "pytest.mark.slurm" not in path.read_text():
                problems.append(f"{block.name}: a SLURM block run by a test not marked slurm")
        elif slurm and block.mark != "not run":
            problems.append(f"{block.name}: a SLURM block must be run by a slurm test")
    assert problems == []


FAST_LIMIT = 60.0
"""Seconds a fast-tier block may take before it fails (a fast block takes <= 5 s: mark a
longer one ``run: slow`` or ``not run``), so a long command never holds the fast tier."""


def _run(block: Block, tmp_path: Path, limit: float = 900.0) -> None:
    for name in (".venv", "jobs", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / "results").mkdir()
    env = dict(os.environ)
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    env.pop("RICHLAZY_MODELS", None)
    with subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", block.body], cwd=tmp_path,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the block's workers too
            proc.communicate()
            pytest.fail(f"{block.name} ran past {limit:.0f} s: mark it 'run: slow' or 'not run'")
    assert proc.returncode == 0, f"{block.name}\n{out[-2000:]}\n{err[-2000:]}"


NEEDS_VENV = pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "richlazy").exists(),
                                reason="needs the .venv that make install creates")


@NEEDS_VENV
@pytest.mark.parametrize("block", [b for b in shell_blocks() if b.mark == ""],
                         ids=lambda b: b.name)
def test_fast_block_exits_0(block: Block, tmp_path) -> None:
    _run(block, tmp_path, FAST_LIMIT)


@NEEDS_VENV
@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in shell_blocks()
                                   if b.mark == "run" and b.detail == "slow"],
                         ids=lambda b: b.name)
def test_slow_block_exits_0(block: Block, tmp_path) -> None:
    _run(block, tmp_path)
