"""The commands in the header of jobs/fig5a-near-gf.toml (the paper-full run of Kunin et al.
2024 Fig. 5a; docs/figures.md, docs/claims.md §9) work as written: run in a scratch directory
holding a copy of the job file and an empty results/ (as a clone has), the sweep writes a
result that `richlazy figure kunin-fig5a` and `richlazy report --kind partition` both draw."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "fig5a-near-gf.toml"

pytestmark = pytest.mark.integration


def header_commands(path: Path) -> list[list[str]]:
    """The `# Run: richlazy ...` and `# Report: richlazy ...` lines of the job file's leading
    comment (the header's form: tests/jobs/test_job_headers.py), split as a shell would,
    without the program name."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        label, _, body = line[1:].strip().partition(":")
        if label in ("Run", "Report") and body.strip().startswith("richlazy "):
            out.append(shlex.split(body)[1:])
    return out


def test_fig5a_near_gf_header_commands_run_as_written(cli, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    commands = header_commands(JOB)
    assert [c[0] for c in commands] == ["sweep", "figure", "report"], commands
    (tmp_path / "jobs").mkdir()
    assert (ROOT / "results" / ".gitkeep").is_file()  # a clone has results/, as here
    (tmp_path / "results").mkdir()
    shutil.copy(JOB, tmp_path / "jobs" / JOB.name)
    monkeypatch.chdir(tmp_path)
    for args in commands:
        r = cli(*args)
        assert r.code == 0, (args, r.err)
    assert (tmp_path / "reports" / "fig5a-paper" / "kunin-fig5a.png").stat().st_size > 0
    manifest = json.loads((tmp_path / "reports" / "fig5a-paper" / "figures.json").read_text())
    text = json.dumps(manifest)
    # the caption carries the near-gradient-flow measure, and no note says f ≈ 0 is unresolved
    assert "first reaches 0.95 L0" in text, text
    assert "not resolved" not in text, text
    assert any(p.suffix in (".png", ".html")
               for p in (tmp_path / "reports" / "fig5a-near-gf").rglob("*"))
