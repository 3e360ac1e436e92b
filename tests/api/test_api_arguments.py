"""The Python API's argument contract (docs/api.md, "Arguments"): a value of the wrong type
or form is an ``ArgumentTypeError``/``ArgumentValueError`` (a ``TypeError``/``ValueError`` and a
``BadInput``) naming the argument, with an example; an unknown keyword lists the known ones;
paths are read as ``os.fspath``/``os.fsdecode`` read them; a run without ``output`` leaves no
scratch folder, whatever ends it; Ctrl-C (a real SIGINT) raises ``KeyboardInterrupt``, never a
``ValueError``, saying what was kept and how to resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import richlazy
from richlazy_cli.errors import ArgumentTypeError, ArgumentValueError, BadInput

TOY_GRID = {"slope": [1.0, 2.0]}


@pytest.fixture
def toy(toy_env, tmp_path, monkeypatch):
    """The toy model, and this test's own temporary folder as the scratch folders' place."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.chdir(tmp_path)
    return scratch


@pytest.mark.parametrize("call,kind,fragments", [
    (lambda: richlazy.sweep("solve", "toy", grid="slope=0,1"), ArgumentTypeError,
     ["grid: expected a mapping", "got str 'slope=0,1'", "e.g. grid={"]),
    (lambda: richlazy.sweep("solve", "toy", grid={"slope": 5}), ArgumentTypeError,
     ['grid["slope"]: expected a spec string or a list of values, got int 5',
      'e.g. grid={"slope": "linspace(0,1,5)"}']),
    (lambda: richlazy.sweep("solve", "toy", grid={"slope": []}), ArgumentValueError,
     ['grid["slope"]: the list of values is empty']),
    (lambda: richlazy.sweep("solve", "toy", grid={3: [1]}), ArgumentTypeError,
     ["grid: the names must be strings, got int 3"]),
    (lambda: richlazy.sweep("solve", "toy", grid=TOY_GRID, params="steps=3"),
     ArgumentTypeError, ["params: expected a mapping", "e.g. params={"]),
    (lambda: richlazy.sweep("solve", "toy", grid=TOY_GRID, bogus=1), ArgumentTypeError,
     ["sweep() got an unexpected keyword argument 'bogus'", "it takes: action, model, grid",
      "max_bytes"]),
    (lambda: richlazy.estimate("solve", "toy", grid=TOY_GRID, bogus=1), ArgumentTypeError,
     ["estimate() got an unexpected keyword argument 'bogus'", "worker_timeout"]),
    (lambda: richlazy.sweep("solve", "toy", grid=TOY_GRID, jobs="two"), ArgumentTypeError,
     ["jobs: expected an integer, got str 'two' (e.g. jobs=2)"]),
    (lambda: richlazy.sweep("solve", "toy", grid=TOY_GRID, force="yes"), ArgumentTypeError,
     ["force: expected True or False"]),
    (lambda: richlazy.sweep(3, "toy", grid=TOY_GRID), ArgumentTypeError,
     ['action: expected a string, got int 3 (e.g. action="solve")']),
    (lambda: richlazy.sweep("solve", "toy", grid=TOY_GRID, output=3), ArgumentTypeError,
     ["output: expected a path (str, bytes or os.PathLike), got int 3"]),
    (lambda: richlazy.sweep("solve", "toy", grid=TOY_GRID, output=""), ArgumentValueError,
     ["output: the path is empty"]),
    (lambda: richlazy.solve("toy", output=["o.h5"]), ArgumentTypeError,
     ["output: expected a path"]),
    (lambda: richlazy.open(None), ArgumentTypeError, ["path: expected a path"]),
], ids=["grid-text", "grid-value-int", "grid-value-empty", "grid-name-int", "params-text",
        "unknown-keyword", "estimate-unknown-keyword", "jobs-text", "force-text",
        "action-int", "output-int", "output-empty", "solve-output-list", "open-none"])
def test_a_misused_argument_is_a_typed_bad_input_naming_it(toy, call, kind, fragments) -> None:
    with pytest.raises(kind) as caught:
        call()
    message = str(caught.value)
    assert isinstance(caught.value, BadInput) and "\n" not in message
    expected_base = TypeError if kind is ArgumentTypeError else ValueError
    assert isinstance(caught.value, expected_base)
    for fragment in fragments:
        assert fragment in message, message
    assert not list(toy.iterdir()), "a scratch folder was left behind"
    assert not list(Path().glob("*.h5*"))


def test_grid_takes_sequences_and_arrays_as_lists(toy) -> None:
    ds = richlazy.sweep("solve", "toy", grid={"slope": np.array([1.0, 2.0])}, jobs=1)
    again = richlazy.sweep("solve", "toy", grid={"slope": (1.0, 2.0)}, jobs=1)
    assert ds["y"].values.tobytes() == again["y"].values.tobytes()
    np.testing.assert_array_equal(ds["slope"].values, [1.0, 2.0])


def test_path_likes_are_read_as_the_os_reads_them(toy, tmp_path) -> None:
    """``bytes`` and ``os.PathLike`` name the file they name, never ``"b'o.h5'"``."""
    richlazy.sweep("solve", "toy", grid=TOY_GRID, output=b"o.h5", jobs=1)
    richlazy.solve("toy", output=b"s.h5")

    class Named:
        def __fspath__(self) -> str:
            return "p.h5"

    richlazy.train("toy", output=Named())
    assert sorted(p.name for p in tmp_path.glob("*.h5")) == ["o.h5", "p.h5", "s.h5"]
    assert not list(tmp_path.glob("b'*"))
    assert int(richlazy.open(b"o.h5")["status"].size) == 2
    assert int(richlazy.open(Named())["status"].size) == 1
    job = tmp_path / "job.toml"
    job.write_text('action = "solve"\nmodel = "toy"\n[grid]\nslope = "1,2"\n')
    assert int(richlazy.sweep(config=os.fsencode(job), jobs=1)["status"].size) == 2


def test_no_scratch_is_left_when_a_run_without_output_fails(toy) -> None:
    """Bad input found by the engine (after the scratch file was named), a run whose every
    point fails: nothing of ours stays in the temporary folder."""
    with pytest.raises(BadInput, match="parameter steps"):
        richlazy.sweep("solve", "toy", grid=TOY_GRID, params={"steps": -1}, jobs=1)
    with pytest.raises(BadInput, match="parameter steps"):
        richlazy.solve("toy", steps=-1)
    with pytest.raises(BadInput, match="--shard 3/3: 3 shards for a grid of 2 points"):
        richlazy.sweep("solve", "toy", grid=TOY_GRID, shard="3/3", jobs=1)
    assert not list(toy.iterdir())


_API_RUN = textwrap.dedent("""\
    import sys
    import richlazy
    out = sys.argv[1] or None
    try:
        richlazy.sweep("solve", "toy", grid={"slope": "linspace(0,1,6)"}, jobs=1,
                       chunk_size=1, output=out, resume=sys.argv[2] == "resume")
    except KeyboardInterrupt as exc:
        print("KeyboardInterrupt:", exc)
        sys.exit(130)
    except ValueError as exc:
        print("ValueError:", type(exc).__name__, exc)
        sys.exit(2)
    print("finished")
""")


def _api_sweep(tmp_path: Path, env: dict[str, str], out: str, marker: Path | None,
               resume: bool = False) -> subprocess.Popen:
    script = tmp_path / "api_run.py"
    script.write_text(_API_RUN)
    extra = {"RICHLAZY_TEST_PAUSE": f"part:{marker}"} if marker is not None else {}
    return subprocess.Popen(
        [sys.executable, str(script), out, "resume" if resume else ""], cwd=tmp_path,
        env={**env, **extra, "TMPDIR": str(tmp_path / "tmp")}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def _interrupt_at_the_first_part(proc: subprocess.Popen, marker: Path) -> str:
    deadline = time.monotonic() + 60
    while not marker.exists():  # the run wrote its first part and waits there
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never wrote a part"
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    marker.unlink()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, out, err)
    return out


@pytest.mark.processes
@pytest.mark.parametrize("with_output", [True, False])
def test_ctrl_c_in_the_api_raises_keyboard_interrupt(tmp_path, toy_env, with_output) -> None:
    """A real SIGINT while ``richlazy.sweep`` runs (once a part is on disk) raises
    ``KeyboardInterrupt``, which ``except ValueError`` does not catch; it says what was kept
    and how to resume, and the resumed sweep finishes. Without ``output``, nothing is kept:
    no scratch folder stays in the temporary folder."""
    (tmp_path / "tmp").mkdir()
    marker = tmp_path / "paused"
    out = "o.h5" if with_output else ""
    said = _interrupt_at_the_first_part(_api_sweep(tmp_path, toy_env, out, marker), marker)
    assert said.startswith("KeyboardInterrupt: interrupted (SIGINT): "), said
    assert not list((tmp_path / "tmp").iterdir())
    if not with_output:
        assert "nothing kept (no output was given" in said, said
        return
    assert "1 of 6 points kept in o.h5.parts" in said and "resume=True" in said, said
    assert (tmp_path / "o.h5.parts").is_dir() and not (tmp_path / "o.h5").exists()
    resumed = _api_sweep(tmp_path, toy_env, out, None, resume=True)
    stdout, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0 and stdout.strip() == "finished", (stdout, err)
    ds = richlazy.open(tmp_path / "o.h5")
    assert int(ds.attrs["complete"]) == 1 and not (tmp_path / "o.h5.parts").exists()
