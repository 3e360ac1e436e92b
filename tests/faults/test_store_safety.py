"""A result file never loses or mixes a point: concurrency, crashes during clean-up, changed
inputs, full disks, bad grids (README: "Sweeps", "Result files")."""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr

from richlazy_cli.engine import lock as lock_module
from richlazy_cli.engine.lock import OutputLock, lock_path
from richlazy_cli.engine.store import WriteFailed, os_error_message, storage_error_line

from ..conftest import (
    ROOT,
    assert_one_line_error,
    pausing,
    release,
    wait_for,
    wait_paused,
)

GRID = ["-g", "slope=linspace(0,1,12)"]
SLOW = ["--jobs", "1", "--chunk-size", "1"]  # one part per point


def _popen(env: dict[str, str], *args: object, marker: Path) -> subprocess.Popen:
    """A sweep in its own process that waits after each part it writes, announcing it in
    ``marker`` (conftest.PAUSE), so that a test catches it in flight."""
    return subprocess.Popen(
        [sys.executable, "-m", "richlazy_cli", *map(str, args)],
        env=pausing(env, "part", marker),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_lock_owner(out: Path, proc: subprocess.Popen) -> None:
    """Until ``proc`` holds the lock of ``out`` (its pid is written once the flock is taken)."""
    wait_for(lambda: lock_module._read_owner(lock_path(out)).get("pid") == proc.pid, proc,
             f"lock of {out} held by pid {proc.pid}", limit=60)


def _data(path: Path) -> dict[str, np.ndarray]:
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        return {name: ds[name].values.copy() for name in ("y", "y_final", "status")}


def _assert_same_data(a: Path, b: Path) -> None:
    da, db = _data(a), _data(b)
    for name in da:
        assert da[name].tobytes() == db[name].tobytes(), name


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, Path]:
    """Uninterrupted runs of the grid at scale 0.1 and 0.5 (computed once, in this process)."""
    from richlazy_cli.cli.app import run

    folder = tmp_path_factory.mktemp("reference")
    refs = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RICHLAZY_MODELS", "tests.engine_models")
        mp.syspath_prepend(str(ROOT))
        for scale in ("0.1", "0.5"):
            out = folder / f"ref-{scale}.h5"
            args = ["sweep", "solve", "toy", *GRID, "-p", f"scale={scale}", "-o", str(out)]
            assert run([*args, "-q", "--jobs", "1"]) == 0
            refs[scale] = out
    return refs


# -- 1, 2: one writer per output ------------------------------------------------------------
@pytest.mark.processes
def test_mixed_sweeps_cannot_share_an_output(tmp_path, toy_env, reference, cli) -> None:
    """A --force run of another sweep on a running output is refused; after SIGKILL the first
    sweep resumes bit for bit, and the other one cannot resume its parts."""
    out = tmp_path / "mixed.h5"
    marker = tmp_path / "paused"
    first = _popen(toy_env, "sweep", "solve", "toy", *GRID, "-p", "scale=0.1", *SLOW, "-o", out,
                   marker=marker)
    try:
        wait_paused(marker, first)  # it holds the lock, waiting after its first part
        second = cli("sweep", "solve", "toy", *GRID, "-p", "scale=0.5", *SLOW, "-o", out,
                     "--force")  # in this process
        assert_one_line_error(second, code=75)  # busy: try later
        assert f"in progress (pid {first.pid}, host {socket.gethostname()})" in second.err
    finally:
        first.kill()
        release(marker, first)
    other = cli("sweep", "solve", "toy", *GRID, "-p", "scale=0.5", "-o", out, "--resume")
    assert_one_line_error(other)
    assert "different sweep" in other.err
    done = cli("sweep", "solve", "toy", *GRID, "-p", "scale=0.1", "-o", out, "--resume", "-q")
    assert done.code == 0, done.err
    assert not Path(f"{out}.parts").exists() and not lock_path(out).exists()
    _assert_same_data(out, reference["0.1"])
    assert cli("store", "verify", out).code == 0
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert json.loads(ds.attrs["params"])["scale"] == 0.1
        history = json.loads(ds.attrs["richlazy_history"])  # CF: history is text
    assert [h["run"] for h in history] == ["start", "resume"]


@pytest.mark.processes
@pytest.mark.slow
def test_foreign_part_in_the_folder_is_never_assembled(tmp_path, toy_env, reference, cli) -> None:
    """A part written by another sweep (as an unlocked older richlazy could) is skipped."""
    out = tmp_path / "f.h5"
    parts = Path(f"{out}.parts")
    marker = tmp_path / "paused"
    proc = _popen(toy_env, "sweep", "solve", "toy", *GRID, "-p", "scale=0.5", *SLOW, "-o", out,
                  marker=marker)
    wait_paused(marker, proc, times=2)
    proc.kill()
    release(marker, proc)
    foreign = sorted(parts.glob("part-*.rlp"))
    proc = _popen(toy_env, "sweep", "solve", "toy", *GRID, "-p", "scale=0.1", *SLOW, "-o",
                  tmp_path / "g.h5", marker=marker)
    wait_paused(marker, proc, times=2)
    proc.kill()
    release(marker, proc)
    # the 0.1 sweep's parts moved under the 0.5 sweep's folder, after its own
    for k, part in enumerate(sorted(Path(f"{tmp_path / 'g.h5'}.parts").glob("part-*.rlp"))):
        part.rename(parts / f"part-{900 + k:06d}.rlp")
    assert foreign
    result = cli("sweep", "solve", "toy", *GRID, "-p", "scale=0.5", "-o", out, "--resume", "-q")
    assert result.code == 0, result.err
    _assert_same_data(out, reference["0.5"])


@pytest.mark.processes
def test_overlapping_cron_resumes_and_forces(tmp_path, toy_env, reference, cli) -> None:
    """Two cron runs of --resume (or of --force) overlap: the second exits 75 (busy) at once."""
    out = tmp_path / "cron.h5"
    args = ["sweep", "solve", "toy", *GRID, "-p", "scale=0.1", *SLOW, "-o", out]
    marker = tmp_path / "paused"
    proc = _popen(toy_env, *args, marker=marker)
    wait_paused(marker, proc)  # killed once its first part is written
    proc.kill()
    release(marker, proc)
    running = _popen(toy_env, *args, "--resume", marker=marker)
    try:
        _wait_for_lock_owner(out, running)  # the killed run's lock file is still there
        wait_paused(marker, running)  # it holds the lock, waiting after its first new part
        late = cli(*args, "--resume")  # the next cron run (in this process)
        assert_one_line_error(late, code=75)  # busy: try later
        assert f"in progress (pid {running.pid}" in late.err
        late = cli(*args, "--force")
        assert_one_line_error(late, code=75)
        assert "in progress" in late.err
        code = release(marker, running)
        _, err = running.communicate(timeout=60)
        assert code == 0, err
    finally:
        running.kill()
    _assert_same_data(out, reference["0.1"])
    assert not lock_path(out).exists()
    before = (out.read_bytes(), out.stat().st_mtime_ns)
    again = cli(*args, "--resume")
    assert again.code == 0
    assert again.err.strip().endswith("complete, nothing to do") and again.out == ""
    assert len(again.err.strip().splitlines()) == 1
    assert (out.read_bytes(), out.stat().st_mtime_ns) == before


# -- the lock itself ------------------------------------------------------------------------
def test_lock_excludes_records_owner_and_is_taken_over_when_stale(tmp_path) -> None:
    out = tmp_path / "o.h5"
    with OutputLock(out):
        owner = json.loads(lock_path(out).read_text())
        assert owner == {"pid": os.getpid(), "host": socket.gethostname()}
        with pytest.raises(lock_module.BadInput, match=f"in progress \\(pid {os.getpid()}"):
            OutputLock(out).acquire()
    assert not lock_path(out).exists()
    # a dead process's lock file (no flock held): taken over, owner rewritten
    lock_path(out).write_text(json.dumps({"pid": 999_999_999, "host": "elsewhere"}))
    with OutputLock(out):
        assert json.loads(lock_path(out).read_text())["pid"] == os.getpid()


def test_lock_falls_back_to_exclusive_creation_without_flock(tmp_path, monkeypatch) -> None:
    def no_flock(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(lock_module.fcntl, "flock", no_flock)
    out = tmp_path / "o.h5"
    with OutputLock(out):
        with pytest.raises(lock_module.BadInput, match="in progress"):
            OutputLock(out).acquire()
    assert not lock_path(out).exists()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    stale = {"pid": int(dead.stdout), "host": socket.gethostname()}
    lock_path(out).write_text(json.dumps(stale))  # a dead process of this host
    with OutputLock(out):
        assert json.loads(lock_path(out).read_text())["pid"] == os.getpid()
    lock_path(out).write_text(json.dumps({"pid": 1, "host": "another-node"}))
    with pytest.raises(lock_module.BadInput, match="host another-node"):
        OutputLock(out).acquire()


# -- 3, 13: clean-up cut short, debris, idempotent resume, foreign folders ------------------
def test_kill_during_clean_up_then_resume_is_done_and_untouched(tmp_path, toy_env, cli) -> None:
    out = tmp_path / "c.h5"
    assert cli("sweep", "solve", "toy", *GRID, "-o", out, "-q", "--jobs", "1").code == 0
    parts = Path(f"{out}.parts")
    parts.mkdir()  # what a kill during the old in-place removal left
    (parts / ".part-000001.rlp.abc.tmp").write_bytes(b"x")
    trash = tmp_path / f".{parts.name}.12345.trash"  # a kill during today's removal
    trash.mkdir()
    (trash / "part-000001.rlp").write_bytes(b"x")
    debris = tmp_path / f".{out.name}.k3x_9qzw.tmp"  # a kill during the final write
    debris.write_bytes(b"x")
    neighbour = tmp_path / f".{out.name}.bak.h5.k3x_9qzw.tmp"  # another output's: kept
    neighbour.write_bytes(b"x")
    before = (out.read_bytes(), out.stat().st_mtime_ns)
    result = cli("sweep", "solve", "toy", *GRID, "-o", out, "--resume")
    assert result.code == 0, result.err
    assert result.err.strip() == f"richlazy: {out}: complete, nothing to do"
    assert result.out == ""
    assert (out.read_bytes(), out.stat().st_mtime_ns) == before
    assert not parts.exists() and not trash.exists() and not debris.exists()
    assert neighbour.exists()


def test_finished_parts_beside_complete_output_count_as_done(
    tmp_path, toy_env, cli, monkeypatch
) -> None:
    """Killed after the final write, before the removal: --resume only removes the folder."""
    from richlazy_cli.engine.parts import PartsFolder

    out = tmp_path / "k.h5"
    with monkeypatch.context() as mp:
        mp.setattr(PartsFolder, "remove", lambda self: None)  # the kill, just before it
        assert cli("sweep", "solve", "toy", *GRID, "-o", out, "-q", "--jobs", "1").code == 0
    assert list(Path(f"{out}.parts").glob("part-*.rlp"))
    before = (out.read_bytes(), out.stat().st_mtime_ns)
    result = cli("sweep", "solve", "toy", *GRID, "-o", out, "--resume")
    assert result.code == 0 and "nothing to do" in result.err
    assert (out.read_bytes(), out.stat().st_mtime_ns) == before
    assert not Path(f"{out}.parts").exists()


def test_force_deletes_only_a_folder_richlazy_made(tmp_path, toy_env, cli) -> None:
    out = tmp_path / "x.h5"
    mine = Path(f"{out}.parts")
    mine.mkdir()
    (mine / "notes.txt").write_text("my own notes")
    for extra in ([], ["--force"], ["--resume"]):
        result = cli("sweep", "solve", "toy", *GRID, "-o", out, *extra)
        assert_one_line_error(result)
        assert "not made by richlazy" in result.err
    assert (mine / "notes.txt").read_text() == "my own notes"


# -- 4: input files by content --------------------------------------------------------------
def _npz(path: Path, seed: int, teacher: bool = True) -> None:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((4, 12))
    beta = np.zeros(12)
    beta[:2] = 1.0
    arrays = {"X": X, "y": X @ beta}
    if teacher:
        arrays["beta_star"] = beta
    np.savez(path, **arrays)


DIAG = ["sweep", "solve", "diagonal", "-g", "alpha=0.1,0.3,1,3", "-p", "t_max=50", "-p",
        "n_records=5", "--jobs", "1", "-q"]


def test_data_file_replaced_between_shards_or_before_resume(tmp_path, cli) -> None:
    data = tmp_path / "data.npz"
    _npz(data, 0)
    s1, s2 = tmp_path / "s1.h5", tmp_path / "s2.h5"
    assert cli(*DIAG, "-p", f"data={data}", "--shard", "1/2", "-o", s1).code == 0
    with xr.open_dataset(s1, engine="h5netcdf") as ds:
        (recorded,) = json.loads(ds.attrs["inputs"])
    assert recorded["size"] == data.stat().st_size and len(recorded["sha256"]) == 64
    _npz(data, 1)  # replaced by other data under the same name
    assert cli(*DIAG, "-p", f"data={data}", "--shard", "2/2", "-o", s2).code == 0
    merged = cli("store", "merge", tmp_path / "m.h5", s1, s2)
    assert_one_line_error(merged)
    assert "other input files" in merged.err
    assert not (tmp_path / "m.h5").exists()
    resumed = cli(*DIAG, "-p", f"data={data}", "--shard", "1/2", "-o", s1, "--resume")
    assert_one_line_error(resumed)
    assert "changed" in resumed.err


@pytest.mark.processes
@pytest.mark.slow
def test_data_file_changed_during_a_run_is_not_assembled(tmp_path, toy_env) -> None:
    """The inputs are hashed again before the final write."""
    data = tmp_path / "data.npz"
    _npz(data, 0)
    out = tmp_path / "d.h5"
    args = [*DIAG[:4], "alpha=linspace(0.1,1,40)", *DIAG[5:], "-p", f"data={data}", "-o", out,
            "--chunk-size", "1"]
    marker = tmp_path / "paused"
    proc = _popen(toy_env, *args, marker=marker)
    wait_paused(marker, proc)  # changed while the run waits after its first part
    _npz(data, 1)
    release(marker, proc, limit=300)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err
    assert "changed during the run" in err and not out.exists()
    assert Path(f"{out}.parts").exists()


# -- 5: diagonal data without a teacher -----------------------------------------------------
def test_diagonal_data_without_beta_star(tmp_path, cli) -> None:
    data = tmp_path / "xy.npz"
    _npz(data, 0, teacher=False)
    out = tmp_path / "xy.h5"
    result = cli(*DIAG, "-p", f"data={data}", "-o", out)
    assert result.code == 0, result.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert (ds["status"].values == 0).all()
        assert np.isnan(ds["beta_star"].values).all()
        assert np.isfinite(ds["w"].values).all()
        assert "nan_meaning" in ds["population_error"].attrs


def test_linear_data_without_beta_star(tmp_path, cli) -> None:
    """The same for ``linear``: a data file of X and y alone is a teacherless problem."""
    data = tmp_path / "xy.npz"
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 6))
    np.savez(data, X=X, y=X @ np.ones((6, 1)))
    out = tmp_path / "lin.h5"
    result = cli("sweep", "solve", "linear", "-g", "delta=-1,0,1", "-p", f"data={data}",
                 "-p", "h=1", "-p", "t_max=5", "-p", "n_records=5", "--jobs", "1", "-q", "-o", out)
    assert result.code == 0, result.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert (ds["status"].values == 0).all()
        assert np.isnan(ds["beta_star"].values).all()
        assert "nan_meaning" in ds["beta_star"].attrs


def test_diagonal_not_reaching_tol_is_not_a_divergence(tmp_path, cli) -> None:
    """``time_to_tol`` is NaN when the loss stays above tol before t_max: still ok."""
    out = tmp_path / "slow.h5"
    result = cli("sweep", "solve", "diagonal", "-g", "alpha=0.1,1", "-p", "t_max=1", "-p",
                 "n_records=5", "-p", "tol=1e-30", "--jobs", "1", "-q", "-o", out)
    assert result.code == 0, result.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert (ds["status"].values == 0).all()
        assert np.isnan(ds["time_to_tol"].values).all()
        assert (ds["converged"].values == 0).all()


# -- 7: unreadable attributes, a grid that disagrees, no status -----------------------------
def _shards(cli, tmp_path: Path) -> tuple[Path, Path]:
    s1, s2 = tmp_path / "s1.h5", tmp_path / "s2.h5"
    for k, path in ((1, s1), (2, s2)):
        assert cli("sweep", "solve", "toy", *GRID, "--shard", f"{k}/2", "-o", path, "-q",
                   "--jobs", "1").code == 0
    return s1, s2


def test_merge_refuses_unreadable_params_and_missing_status(tmp_path, toy_env, cli) -> None:
    s1, s2 = _shards(cli, tmp_path)
    with h5py.File(s2, "a") as f:
        f.attrs["params"] = "{not json"
    result = cli("store", "merge", tmp_path / "m.h5", s1, s2)
    assert_one_line_error(result)
    assert "params" in result.err and not (tmp_path / "m.h5").exists()
    with h5py.File(s2, "a") as f:
        f.attrs["params"] = xr.open_dataset(s1, engine="h5netcdf").attrs["params"]
        del f["status"]
    result = cli("store", "merge", tmp_path / "m.h5", s1, s2)
    assert_one_line_error(result)
    assert "no status variable" in result.err
    result = cli("sweep", "solve", "toy", *GRID, "--shard", "2/2", "-o", s2, "--resume")
    assert_one_line_error(result)
    assert "no status variable" in result.err


def test_verify_catches_a_grid_attribute_that_disagrees(tmp_path, toy_env, cli) -> None:
    out = tmp_path / "v.h5"
    assert cli("sweep", "solve", "toy", *GRID, "-o", out, "-q", "--jobs", "1").code == 0
    assert cli("store", "verify", out).code == 0
    with h5py.File(out, "a") as f:
        f.attrs["grid"] = json.dumps({"slope": "linspace(0,2,12)"})
    result = cli("store", "verify", out)
    assert result.code == 1
    assert "coordinate slope disagrees with the grid attribute" in result.err
    assert "fingerprint does not match" in result.err


# -- 8: permissions -------------------------------------------------------------------------
@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_result_files_follow_the_umask(tmp_path, toy_env, cli, umask) -> None:
    from richlazy_cli.engine.store import file_mode

    out = tmp_path / "u.h5"
    old = os.umask(umask)
    file_mode.cache_clear()
    try:
        assert cli("sweep", "solve", "toy", *GRID, "-o", out, "-q", "--jobs", "1").code == 0
    finally:
        os.umask(old)
        file_mode.cache_clear()
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask


# -- 9: full disks and other OS errors ------------------------------------------------------
def _limited(limit: int):
    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return preexec


def test_disk_full_during_the_final_write(tmp_path, toy_env, cli) -> None:
    """A file-size limit the final file exceeds (each part fits): exit 2 with one line; the
    previous output and the parts are intact, and --resume finishes once space is back."""
    out = tmp_path / "big.h5"
    assert cli("sweep", "solve", "toy", *GRID, "-o", out, "-q", "--jobs", "1").code == 0
    previous = out.read_bytes()
    args = ["sweep", "solve", "toy", "-g", "slope=linspace(0,1,40)", "-p", "steps=2000", "-o",
            str(out), "--jobs", "1", "--chunk-size", "2", "-q"]
    proc = subprocess.run([sys.executable, "-m", "richlazy_cli", *args, "--force"], env=toy_env,
                          preexec_fn=_limited(400_000), capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert "file-size limit" in proc.stderr
    assert out.read_bytes() == previous
    assert len(list(Path(f"{out}.parts").glob("part-*.rlp"))) == 20
    assert cli(*args, "--resume").code == 0
    assert _data(out)["status"].size == 40


def test_failed_hdf5_write_is_an_exception_not_a_crash(tmp_path) -> None:
    """The HDF5 library crashes the interpreter on the handles a failed write leaves; the
    write runs in a forked child, so the caller gets an exception and exits normally."""
    script = f"""
import signal, resource, sys
sys.path.insert(0, {str(ROOT)!r})
import numpy as np, xarray as xr
from richlazy_cli.engine import store
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))
store.check_space = lambda path, nbytes: None  # let the write itself fail
ds = xr.Dataset({{"a": (("x",), np.random.default_rng(0).random(100_000), {{"long_name": "a"}})}})
try:
    store.write_result(ds, {str(tmp_path / 'o.h5')!r}, compress=False)
except store.WriteFailed as exc:
    print("caught:", exc)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    assert "caught:" in proc.stdout and "file too large" in proc.stdout
    assert not (tmp_path / "o.h5").exists()
    assert not list(tmp_path.glob(".*.tmp"))


def test_os_errors_have_their_own_line() -> None:
    for code, words in ((errno.ENOSPC, "no space"), (errno.EROFS, "read-only"),
                        (errno.EACCES, "permission denied"), (errno.ENAMETOOLONG, "too long")):
        exc = OSError(code, os.strerror(code), "some/file")
        assert os_error_message(exc) == f"some/file: {words}" or words in os_error_message(exc)
    hdf5 = OSError("Can't write data (file write failed: errno = 28, error message = 'No space')")
    assert "no space" in os_error_message(hdf5)
    assert storage_error_line(WriteFailed("x.h5: cannot write the result (no space)")) is not None
    assert storage_error_line(ValueError("a bug")) is None


def test_long_names_and_a_results_file(tmp_path, toy_env, cli, monkeypatch) -> None:
    long_out = tmp_path / ("a" * 250 + ".h5")  # 253 characters; + ".parts" is too long
    result = cli("sweep", "solve", "toy", *GRID, "-o", long_out)
    assert_one_line_error(result)
    assert "too long" in result.err
    monkeypatch.chdir(tmp_path)
    Path("results").write_text("not a folder")
    result = cli("solve", "toy")
    assert_one_line_error(result)
    assert "results" in result.err and "not a folder" in result.err


@pytest.mark.skipif(os.geteuid() == 0, reason="permission bits do not stop root")
def test_unwritable_folder(tmp_path, toy_env, cli) -> None:  # pragma: no cover - not as root
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        result = cli("sweep", "solve", "toy", *GRID, "-o", folder / "o.h5")
        assert_one_line_error(result)
        assert "permission denied" in result.err
    finally:
        folder.chmod(0o700)


# -- 10, 11: grids --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("slope=range(nan)", "finite"),
        ("slope=range(0,10,0)", "step must not be zero"),
        ("slope=linspace(0,1,inf)", "finite"),
        ("slope=linspace(0,1,nan)", "finite"),
        ("slope=0,-0", "0 and -0"),
        ("steps=1" + "0" * 400, "64 bits"),
        ("slope=1" + "0" * 400, "out of range"),
        ("slope=linspace(0,1,1e12)", "--max-points"),
    ],
)
def test_bad_grid_specs_are_one_line(tmp_path, toy_env, cli, spec, words) -> None:
    started = time.monotonic()
    result = cli("sweep", "solve", "toy", "-g", spec, "-o", tmp_path / "g.h5", "--dry-run")
    assert_one_line_error(result)
    assert words in result.err and len(result.err) < 300
    assert time.monotonic() - started < 5


def test_a_huge_parameter_value_is_one_line(toy_env, cli) -> None:
    result = cli("solve", "toy", "-p", "steps=1" + "0" * 400)
    assert_one_line_error(result)
    assert len(result.err) < 300


def test_grid_size_limit_and_max_points(tmp_path, toy_env, cli) -> None:
    huge = ["-g", "slope=linspace(0,1,10000)", "-g", "seed=range(10000)"]  # 10^8 points
    result = cli("sweep", "solve", "toy", *huge, "-o", tmp_path / "h.h5", "--dry-run")
    assert_one_line_error(result)
    assert "100,000,000 points" in result.err and "10,000,000" in result.err
    small = ["-g", "slope=linspace(0,1,20)", "-o", tmp_path / "s.h5", "--dry-run"]
    assert "--max-points" in cli("sweep", "solve", "toy", *small, "--max-points", "10").err
    assert cli("sweep", "solve", "toy", *small, "--max-points", "20").code == 0


def test_string_parameters_on_the_grid(tmp_path, toy_env, cli) -> None:
    out = tmp_path / "s.h5"
    assert cli("sweep", "solve", "toy", "-g", "label=a,b", "-o", out, "-q").code == 0
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert list(ds["label"].values) == ["a", "b"]
    clash = tmp_path / "m.h5"
    result = cli("sweep", "solve", "single-neuron", "-g", "method=exact,numeric,both", "-o",
                 clash, "--jobs", "1")
    assert_one_line_error(result)
    assert "also a dimension of the model's output" in result.err
    assert not clash.exists() and not Path(f"{clash}.parts").exists()


def test_a_sweep_that_cannot_fit_on_the_disk_stops_after_its_first_chunk(
    tmp_path, toy_env, cli, monkeypatch
) -> None:
    """The first chunk's bytes per point times the sweep's points, for the parts and the final
    file, are checked against the free space: exit 2 at once, the parts folder kept."""
    out = tmp_path / "full.h5"
    args = ["sweep", "solve", "toy", "-g", "slope=linspace(0,1,40)", "-p", "steps=2000", "-o",
            out, "--jobs", "1", "--chunk-size", "2", "-q"]
    real = os.statvfs

    def nearly_full(path):
        found = real(path)
        return os.statvfs_result((*found[:4], 10, *found[5:]))  # f_bavail: 10 blocks

    monkeypatch.setattr(os, "statvfs", nearly_full)
    result = cli(*args)
    assert_one_line_error(result)
    assert "no space left" in result.err and "parts and final file" in result.err
    assert Path(f"{out}.parts").is_dir() and not out.exists()
    monkeypatch.setattr(os, "statvfs", real)
    assert cli(*args, "--resume").code == 0
