"""The README's tour, run as a newcomer would after ``make demo`` and ``make test``.

The commands are read from the README's "A tour" block, so the page cannot drift from what
works. Each runs in a fresh folder holding what a clone holds after the set-up (``.venv``,
``jobs/``, ``examples/`` and the ``results/`` folder that ``make demo`` leaves), in order, in
bash, and must exit 0. Scaled down where the README says so: the ``fig1a`` job to 5,000 steps.
Then the README's Python block runs in the same folder, as the README says it does.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCALED = {"jobs/fig1a.toml": ["-p", "steps=5000"]}
"""Options appended to a tour command that names the key (what the README says is scaled)."""


def tour_commands(readme: Path = ROOT / "README.md") -> list[str]:
    """The command lines of the README's tour block, comments stripped."""
    text = readme.read_text()
    section = text.split("## A tour", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, "the README's tour has no ```sh block"
    commands = []
    for line in block.group(1).splitlines():
        words = shlex.split(line, comments=True)
        if words:
            commands.append(shlex.join(words))
    return commands


def test_the_tour_block_is_found_and_starts_by_activating() -> None:
    commands = tour_commands()
    assert commands[0] == "source .venv/bin/activate"
    assert any(c.startswith("richlazy sweep") for c in commands)
    assert "make demo" in (ROOT / "README.md").read_text().split("## A tour")[0]
    for key in SCALED:
        assert any(key in c for c in commands), f"{key} is no longer in the tour"
    assert "5,000 steps" in (ROOT / "README.md").read_text()  # the README says it is scaled


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "activate").exists(),
                    reason="needs the .venv that make install creates")
def test_every_tour_command_exits_0(tmp_path) -> None:
    for name in (".venv", "jobs", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / "results").mkdir()  # make demo leaves results/demo/ there
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)  # this checkout's code, whichever the venv points at
    env["RICHLAZY_EXAMPLE_OUT"] = str(tmp_path / "reports" / "examples")
    env.pop("RICHLAZY_MODELS", None)
    activate, *commands = tour_commands()
    for command in commands:
        extra = next((opts for key, opts in SCALED.items() if key in command), [])
        line = f"{activate} && {command} {shlex.join(extra)}".strip()
        proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, f"{command}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    assert (tmp_path / "results" / "fig1a.h5").exists()
    assert (tmp_path / "reports" / "fig1a" / "index.html").exists()
    assert (tmp_path / "reports" / "sn-delta" / "index.html").exists()
    # the README's Python block, after the tour in the same folder, as the README says
    proc = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", python_block()],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "results" / "fig7.h5").exists()
    assert (tmp_path / "reports" / "fig1a-python" / "index.html").exists()


def python_block(readme: Path = ROOT / "README.md") -> str:
    """The README's Python example: the first ```python block after the tour."""
    section = readme.read_text().split("## A tour", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None, "the README's tour section has no ```python block"
    return block.group(1)


def test_the_python_block_is_found_and_uses_the_api() -> None:
    code = python_block()
    assert code.startswith("import richlazy\n")
    for name in ("sweep", "open", "estimate", "report"):
        assert f"richlazy.{name}(" in code, name
