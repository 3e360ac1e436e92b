"""``build_report``: result files in, figures + ``index.html`` + ``summary.json`` out.

Everything the user typed is validated before anything is written (a bad input raises
:class:`~richlazy_cli.params.BadInput` with one line and leaves ``out_dir`` untouched):
the files (HDF5 written by richlazy), ``kind``, ``fmt``, ``reduce``, each ``--var`` (a
variable of at least one input), ``--x``/``--y`` (a numeric dimension of at least one input),
each ``--at DIM=VALUE`` (a dimension of at least one input, and a value on the grid of every
input that has that dimension).

What ``kind="auto"`` draws for each file and variable:

* **phase** — the file has two or more numeric grid dimensions besides ``seed`` (or ``--x``
  and ``--y`` are both given) and the variable has both axes;
* **theory** — the variable has a ``method`` dimension (x: ``--x``, else ``step``/``time``,
  else its first grid dimension);
* **curves** — the variable has a ``step``/``time`` dimension and no ``method`` dimension;
* **lines** — the file has exactly one numeric grid dimension besides ``seed`` and the
  variable has it and no ``method`` dimension.

An explicit ``kind`` draws only that kind and is a BadInput for a file where it does not apply.
Figures are named ``<stem>-<kind>-<var>.<fmt>``.

Each kind is one row of :data:`REPORT_KINDS` (a :class:`Kind`): how it plans a file's figures,
how it draws one, what it checks before anything is written, and the figures it draws from whole
files (the scaling fits, ``report/families.py``'s family figures). ``auto`` is the row that
plans every generic kind. A new kind or view is its functions and one row there (and its name
in :class:`~.options.ReportKind`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.cf import internal_name, user_name
from ..errors import BadInput
from ..params import jsonable
from . import neurons
from .data import REDUCTIONS, ResultFile, format_value, resolve_at
from .explore import write_explore
from .families import family_figures, family_set_figures
from .html import render_index
from .options import ReportKind
from .plots import Drawn, draw_lines, draw_phase, draw_theory
from .style import FORMATS, WRITER, save, stale_files, style
from .summary import variable_stats

KINDS = tuple(k.value for k in ReportKind)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")


@dataclass
class Plan:
    """One figure to draw."""

    kind: str
    rf: ResultFile
    var: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Request:
    """What the user asked for, in the files' internal names (``method``, ``time``)."""

    kind: str = "auto"
    variables: list[str] | None = None
    x: str | None = None
    y: str | None = None
    at: dict[str, str] = field(default_factory=dict)
    reduce: str = "mean"
    fmt: str = "png"
    contours: bool = False


# -- validation -----------------------------------------------------------------------------
def _load_all(inputs: Sequence[Path]) -> list[ResultFile]:
    files: list[ResultFile] = []
    seen: dict[str, int] = {}
    for path in inputs:
        stem = Path(path).stem
        seen[stem] = seen.get(stem, 0) + 1
        if seen[stem] > 1:
            stem = f"{stem}-{seen[stem]}"
        files.append(ResultFile.load(Path(path), stem))
    return files


def _where(files: list[ResultFile]) -> str:
    return files[0].path.name if len(files) == 1 else "any input"


def _check_names(
    files: list[ResultFile],
    variables: list[str] | None,
    x: str | None,
    y: str | None,
    at: dict[str, str],
) -> None:
    for name in variables or []:
        if not any(name in rf.ds.data_vars for rf in files):
            known = sorted({user_name(v) for rf in files for v in rf.variables})
            raise BadInput(f"--var {name}: no such variable in {_where(files)} "
                           f"(variables: {', '.join(known)})")
    dims = sorted({user_name(str(d), dimension=True) for rf in files for d in rf.ds.dims})
    _check_axes(files, x, y, dims)
    for dim, value in at.items():
        if not any(dim in rf.ds.dims for rf in files):
            raise BadInput(f"--at {dim}={value}: {dim} is not a dimension of {_where(files)} "
                           f"(dimensions: {', '.join(dims)})")
        if dim in (x, y):
            raise BadInput(f"--at {dim}={value}: {dim} is also an axis (--x/--y)")


def _check_axes(files: list[ResultFile], x: str | None, y: str | None, dims: list[str]
                ) -> None:
    """``--x`` and ``--y``: numeric dimensions of at least one input, not the same."""
    for option, dim in (("--x", x), ("--y", y)):
        if dim is None:
            continue
        if not any(dim in rf.ds.dims for rf in files):
            raise BadInput(f"{option} {dim}: not a dimension of {_where(files)} "
                           f"(dimensions: {', '.join(dims)})")
        if not all(rf.is_numeric(dim) for rf in files if dim in rf.ds.dims):
            raise BadInput(f"{option} {dim}: the values of {dim} are not numbers")
    if x is not None and x == y:
        raise BadInput(f"--x and --y are both {x}")


# -- planning -------------------------------------------------------------------------------
def _phase_axes(
    rf: ResultFile, x: str | None, y: str | None, at: dict[str, int]
) -> tuple[str, str] | None:
    rest = [d for d in rf.phase_dims if d not in at and d not in (x, y)]
    ax_x = x if x is not None and x in rf.ds.dims else None
    ax_y = y if y is not None and y in rf.ds.dims else None
    if ax_x is None and rest:
        ax_x = rest.pop(0)
    if ax_y is None and rest:
        ax_y = rest.pop(0)
    return (ax_x, ax_y) if ax_x is not None and ax_y is not None else None


def _group(rf: ResultFile, dims: tuple[str, ...], used: tuple[str | None, ...],
           at: dict[str, int]) -> str | None:
    """The first grid dimension (not seed) of the variable that is free to label lines."""
    for d in rf.grid_dims:
        if d in dims and d != "seed" and d not in used and d not in at and rf.ds.sizes[d] > 1:
            return d
    return None


def _theory_x(rf: ResultFile, name: str, x: str | None, at: dict[str, int]) -> str | None:
    dims = rf.ds[name].dims
    if x is not None and x in dims:
        return x
    tdim = rf.time_dim(name)
    if tdim is not None:
        return tdim
    return next((d for d in rf.phase_dims if d in dims and d not in at), None)


def _dims(rf: ResultFile, name: str) -> tuple[str, ...]:
    return tuple(str(d) for d in rf.ds[name].dims)


def _free(rf: ResultFile, at: dict[str, int]) -> list[str]:
    return [d for d in rf.phase_dims if d not in at]


def _plan_phase(rf: ResultFile, name: str, at: dict[str, int], req: Request, explicit: bool
                ) -> Plan | None:
    """Two numeric grid axes the variable has; by ``auto`` only when two are free (or both
    ``--x`` and ``--y`` are given)."""
    axes = _phase_axes(rf, req.x, req.y, at)
    if axes is None or not set(axes) <= set(_dims(rf, name)):
        return None
    if explicit or len(_free(rf, at)) >= 2 or (req.x is not None and req.y is not None):
        return Plan("phase", rf, name, {"x": axes[0], "y": axes[1]})
    return None


def _plan_theory(rf: ResultFile, name: str, at: dict[str, int], req: Request, explicit: bool
                 ) -> Plan | None:
    """A variable with a ``method`` dimension, against ``--x``, time or its first grid axis."""
    dims = _dims(rf, name)
    tx = _theory_x(rf, name, req.x, at) if "method" in dims else None
    if tx is None:
        return None
    return Plan("theory", rf, name, {"x": tx, "group": _group(rf, dims, (tx,), at)})


def _plan_curves(rf: ResultFile, name: str, at: dict[str, int], req: Request, explicit: bool
                 ) -> Plan | None:
    """A variable with a step/time axis (``--x`` when explicit), one line per value of a grid
    dimension, one panel per value of the next; by ``auto`` only without ``method``."""
    dims = _dims(rf, name)
    if not explicit and "method" in dims:
        return None
    cx = req.x if explicit and req.x is not None and req.x in dims else rf.time_dim(name)
    if cx is None:
        return None
    group = _group(rf, dims, (cx,), at)
    panel = _group(rf, dims, (cx, group), at) if group is not None else None
    return Plan("curves", rf, name, {"x": cx, "group": group, "panel": panel})


def _plan_lines(rf: ResultFile, name: str, at: dict[str, int], req: Request, explicit: bool
                ) -> Plan | None:
    """A variable against the file's one numeric grid axis (``auto``). An explicit ``--kind
    lines`` over two or more grid dimensions: x is --x (else the first), one line per value of
    the next (Azulay et al.'s error against alpha, one line per s), one panel per value of a
    third."""
    dims, free = _dims(rf, name), _free(rf, at)
    if not explicit and (len(free) != 1 or "method" in dims):
        return None
    lx = req.x if req.x is not None and req.x in dims else (
        free[0] if len(free) == 1 or (explicit and free) else None)
    if lx is None or lx not in dims:
        return None
    group = _group(rf, dims, (lx,), at) if explicit else None
    panel = _group(rf, dims, (lx, group), at) if group is not None else None
    return Plan("lines", rf, name, {"x": lx, "group": group, "panel": panel})


VariablePlanner = Callable[[ResultFile, str, dict[str, int], Request, bool], Plan | None]
FilePlanner = Callable[[ResultFile, list[str], dict[str, int], Request], list[Plan]]


def _per_variable(kind: str, plan_one: VariablePlanner, why: str) -> FilePlanner:
    """The planner of an explicit generic ``kind``: ``plan_one`` for each variable, a BadInput
    (``why``) when it plans nothing for the file."""
    def plan(rf: ResultFile, names: list[str], at: dict[str, int], req: Request) -> list[Plan]:
        plans = [p for name in names if (p := plan_one(rf, name, at, req, True)) is not None]
        if not plans:
            raise BadInput(f"--kind {kind} does not apply to {rf.path.name}: "
                           + why.format(grid=", ".join(rf.grid_dims) or "none"))
        return plans
    return plan


def _neuron_view(kind: str) -> FilePlanner:
    """The planner of an explicit neuron-level view (:mod:`.neurons`): every variable it reads,
    a BadInput when it does not apply."""
    def plan(rf: ResultFile, names: list[str], at: dict[str, int], req: Request) -> list[Plan]:
        return [Plan(kind, rf, v, a) for v, a in neurons.plans(rf, kind, strict=True)]
    return plan


def _plan_auto(rf: ResultFile, names: list[str], at: dict[str, int], req: Request
               ) -> list[Plan]:
    """Every neuron-level view that applies (to a variable among ``names``), then for each
    variable every generic kind that applies, in :data:`GENERIC` order."""
    plans = [Plan(k, rf, v, a) for k in neurons.KINDS
             for v, a in neurons.plans(rf, k, strict=False) if v in names]
    for name in names:
        plans += [p for plan_one in GENERIC.values()
                  if (p := plan_one(rf, name, at, req, False)) is not None]
    return plans


def _plan_nothing(rf: ResultFile, names: list[str], at: dict[str, int], req: Request
                  ) -> list[Plan]:
    return []


GENERIC: dict[str, VariablePlanner] = {
    "phase": _plan_phase, "theory": _plan_theory, "curves": _plan_curves, "lines": _plan_lines,
}


def _all_failed(rf: ResultFile) -> str:
    counts = rf.point_counts()
    if counts["failed"]:
        return (f"all {counts['total']} points failed ({counts['failed']} failed, "
                f"{counts['missing']} not computed): nothing to draw")
    return f"none of the {counts['total']} points was computed: nothing to draw"


def is_constant(rf: ResultFile, name: str) -> bool:
    """Whether ``name`` takes the same value at every grid point (a teacher shared by every
    configuration, a sign that never changes): a set-up echoed per point, not a result, so
    it is not drawn (``--var`` still draws it). A variable without a grid dimension, or with a
    time axis, is never constant in this sense."""
    da = rf.masked(name)
    grid = [d for d in rf.grid_dims if d in da.dims and da.sizes[d] > 1]
    if not grid or rf.time_dim(name) is not None:
        return False
    first = da.isel({d: 0 for d in grid})
    same = (da == first) | (da.isnull() & first.isnull())
    return bool(same.all())


def _has_values(rf: ResultFile, name: str) -> bool:
    values = np.asarray(rf.masked(name).values, dtype=float)
    return bool(np.isfinite(values).any())


# -- captions -------------------------------------------------------------------------------
def changed_params(rf: ResultFile) -> tuple[dict[str, Any], bool]:
    """Parameters whose value in the file differs from the model's default (grid ones aside).

    Returns (parameters, whether the defaults were known). If the model is not registered in
    this installation every non-grid parameter is returned.
    """
    given = {k: v for k, v in rf.params.items() if k not in rf.grid}
    try:
        from ..models.base import get_model

        model = get_model(rf.model)
        defaults = model.defaults()
    except BadInput:  # an unknown model, or one whose module fails to import: show everything
        return given, False
    given = model.as_named_now(rf.action, given)  # a file written under older record names
    return {k: v for k, v in given.items() if k not in defaults or jsonable(defaults[k]) != v}, True


def _compact(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, list | dict) else format_value(value)
    return text if len(text) <= 60 else text[:57] + "..."


def provenance_fields(rf: ResultFile) -> dict[str, str]:
    """Label -> text: what each caption and the HTML section say about the file."""
    changed, known = changed_params(rf)
    params = ", ".join(f"{k} = {_compact(v)}" for k, v in sorted(changed.items())) or "none"
    counts = rf.point_counts()
    fields = {
        "model": rf.model,
        "action": rf.action,
        ("parameters differing from defaults" if known else "parameters"): params,
        "grid": ", ".join(f"{k} = {v}" if len(v) <= 60 else
                          f"{k} = {rf.ds.sizes.get(k, '?')} values (see the file's grid)"
                          for k, v in rf.grid.items()) or "none (single run)",
    }
    if counts["total"]:
        fields["points"] = (f"{counts['done']} of {counts['total']} ok, {counts['failed']} failed, "
                            f"{counts['missing']} not computed")
    fields["created"] = rf.created
    fields["source"] = str(rf.path)
    return fields


def caption(drawn_description: str, notes: list[str], missing: int, fields: dict[str, str],
            nan_meaning: str = "", failed_points: int = 0) -> str:
    """The figure's caption. Missing values are blamed on failed points only when the file has
    failed points; a variable whose ``nan_meaning`` attribute says what a NaN means (a
    threshold never reached, no teacher) has it quoted instead."""
    text = drawn_description[0].upper() + drawn_description[1:]
    if notes:
        text += f" ({'; '.join(notes)})"
    text += "."
    if missing:
        plural = "s" if missing != 1 else ""
        if nan_meaning and not failed_points:
            text += f" {missing} value{plural} not a number ({nan_meaning}), shown as gaps " \
                "or hatched grey."
        elif nan_meaning:
            text += (f" {missing} missing value{plural}, shown as gaps or hatched grey: "
                     f"{failed_points} failed or uncomputed point(s), the rest NaN because "
                     f"{nan_meaning}.")
        else:
            text += f" {missing} missing value{plural} (failed or not computed)"
            text += " shown as gaps or hatched grey."
    text += " " + "; ".join(f"{k}: {v}" for k, v in fields.items()) + "."
    return text


# -- drawing --------------------------------------------------------------------------------
Drawer = Callable[[Plan, dict[str, int], Request], Drawn]


def _draw_phase(plan: Plan, at: dict[str, int], req: Request) -> Drawn:
    a = plan.args
    return draw_phase(plan.rf, plan.var, a["x"], a["y"], at, req.reduce, req.contours)


def _draw_theory(plan: Plan, at: dict[str, int], req: Request) -> Drawn:
    return draw_theory(plan.rf, plan.var, plan.args["x"], plan.args["group"], at, req.reduce)


def _draw_lines(plan: Plan, at: dict[str, int], req: Request) -> Drawn:
    a = plan.args
    return draw_lines(plan.rf, plan.var, a["x"], a["group"], at, req.reduce, plan.kind,
                      a.get("panel"))


def _draw_view(plan: Plan, at: dict[str, int], req: Request) -> Drawn:
    return neurons.draw(plan.kind, plan.rf, at)


def _draws_nothing(plan: Plan, at: dict[str, int], req: Request) -> Drawn:
    raise RuntimeError(f"the kind {plan.kind} plans no figure of one variable")


def figure_name(stem: str, kind: str, var: str, fmt: str) -> str:
    return f"{_UNSAFE.sub('_', stem)}-{kind}-{_UNSAFE.sub('_', var)}.{fmt}"


def _scaling_module() -> Any:
    from . import scaling  # imported on first use: it loads SciPy's statistics

    return scaling


def _finite(value: Any) -> Any:
    """JSON-safe: numpy values to Python, NaN and infinities to None, recursively."""
    value = jsonable(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _masked_dataset(rf: ResultFile) -> Any:
    """The dataset with every floating variable NaN at failed or missing points."""
    ds = rf.ds.copy()
    for name in rf.variables:
        if ds[name].dtype.kind == "f":
            ds[name] = rf.masked(name)
    return ds


def _check_scaling(rf: ResultFile) -> None:
    """BadInput (before anything is written) when the scaling analysis cannot use the file."""
    module = _scaling_module()
    check = getattr(module, "check_dataset", None) or getattr(module, "mean_loss", None)
    if check is None:
        return
    try:
        check(rf.ds)
    except (ValueError, KeyError) as exc:
        reason = f"no variable {exc}" if isinstance(exc, KeyError) else str(exc)
        raise BadInput(f"--kind scaling does not apply to {rf.path.name}: {reason}") from None


def _scaling_figures(rf: ResultFile, out_dir: Path, fmt: str, fields: dict[str, str]
                     ) -> list[dict[str, Any]]:
    """The hermite scaling figures (``report/scaling.py``), with failed points masked."""
    module = _scaling_module()
    entries = []
    try:
        items = module.scaling_figures(_masked_dataset(rf), out_dir, rf.stem, fmt)
    except (ValueError, KeyError) as exc:
        raise BadInput(f"--kind scaling failed on {rf.path.name}: {exc}") from None
    for item in items:
        file = Path(item["file"])
        if file.is_absolute():
            try:
                file = file.relative_to(out_dir.resolve())
            except ValueError:
                file = file.relative_to(out_dir) if file.is_relative_to(out_dir) else file
        text = str(item.get("caption", "")).rstrip(".")
        text += ". " + "; ".join(f"{k}: {v}" for k, v in fields.items()) + "."
        entries.append({
            "file": file.as_posix(), "kind": "scaling", "var": item.get("var", ""),
            "source": str(rf.path), "caption": text, "stem": rf.stem,
            "fits": _finite(item.get("fits", {})),
        })
    return entries


# -- the kinds ------------------------------------------------------------------------------
Check = Callable[[list[ResultFile], list[Plan], dict[str, list[str]]], None]
WholeBuilder = Callable[[list[ResultFile], Path, Request, dict[str, dict[str, str]]],
                        list[dict[str, Any]]]


def _something_to_draw(files: list[ResultFile], plans: list[Plan],
                       notes: dict[str, list[str]]) -> None:
    if not plans and not any(notes.values()):
        raise BadInput("nothing to draw: no variable has a grid, step, time or method dimension")


def _scaling_applies(files: list[ResultFile], plans: list[Plan],
                     notes: dict[str, list[str]]) -> None:
    for rf in files:
        _check_scaling(rf)


def _scaling_all(files: list[ResultFile], out_dir: Path, req: Request,
                 fields: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    return [entry for rf in files
            for entry in _scaling_figures(rf, out_dir, req.fmt, fields[rf.stem])]


def _family_sets(files: list[ResultFile], out_dir: Path, req: Request,
                 fields: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """The figures drawn from several files of one family together (report/families.py)."""
    return family_set_figures(files, out_dir, req.fmt, fields, req.kind)


def _family_files(files: list[ResultFile], out_dir: Path, req: Request,
                  fields: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """The model families' own figures, file by file (report/families.py)."""
    return [entry for rf in files
            for entry in family_figures(rf, out_dir, req.fmt, fields[rf.stem])]


@dataclass(frozen=True)
class Kind:
    """One report kind: ``plan`` gives a file's figures of one variable each (from the
    variables worth drawing), ``draw`` draws one of them (the row of the plan's own kind draws
    it), ``check`` raises a BadInput before anything is written, ``whole`` draws the figures
    that read whole files, after the planned ones, and ``summary`` names the values of
    :attr:`~.plots.Drawn.extra` that go into the figure's ``summary.json`` entry."""

    plan: FilePlanner
    draw: Drawer = _draws_nothing
    check: Check = _something_to_draw
    whole: tuple[WholeBuilder, ...] = ()
    summary: tuple[str, ...] = ()


REPORT_KINDS: dict[str, Kind] = {
    "auto": Kind(_plan_auto, whole=(_family_sets, _family_files)),
    "phase": Kind(_per_variable("phase", _plan_phase, "it needs two numeric grid dimensions "
                                "(grid: {grid}), or --x and --y"), _draw_phase),
    "curves": Kind(_per_variable("curves", _plan_curves,
                                 "no variable has a step or time dimension"), _draw_lines),
    "theory": Kind(_per_variable("theory", _plan_theory, "no variable has a method dimension"),
                   _draw_theory, whole=(_family_sets,), summary=("max_abs_diff",)),
    "lines": Kind(_per_variable("lines", _plan_lines, "it needs one numeric grid dimension"),
                  _draw_lines),
    "scaling": Kind(_plan_nothing, check=_scaling_applies, whole=(_scaling_all,)),
    **{view: Kind(_neuron_view(view), _draw_view) for view in neurons.KINDS},
}


# -- the build --------------------------------------------------------------------------------
def _request(kind: str, variables: list[str] | None, x: str | None, y: str | None,
             at: dict[str, str] | None, reduce: str, fmt: str, contours: bool) -> Request:
    """The request in internal names (as the file gives them, ``solution_method``, or as the
    models do, ``method``); a BadInput on an unknown kind, format or reduction."""
    if kind not in KINDS:
        raise BadInput(f"--kind {kind!r}: expected one of {', '.join(KINDS)}")
    if fmt not in FORMATS:
        raise BadInput(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if reduce not in REDUCTIONS:
        raise BadInput(f"--reduce {reduce!r}: expected one of {', '.join(REDUCTIONS)}")
    return Request(
        kind=kind,
        variables=[internal_name(v) for v in variables] if variables else None,
        x=None if x is None else internal_name(x),
        y=None if y is None else internal_name(y),
        at={internal_name(dim): value for dim, value in (at or {}).items()},
        reduce=reduce, fmt=fmt, contours=contours)


def _output_folder(inputs: Sequence[Path], out_dir: Path) -> Path:
    if not inputs:
        raise BadInput("no result files given")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise BadInput(f"{out_dir} exists and is not a folder")
    return out_dir


def _drawable(rf: ResultFile, names: list[str], req: Request, notes: list[str]) -> list[str]:
    """The variables among ``names`` worth drawing; a note in ``notes`` for each other one."""
    drawable = []
    for name in names:
        if not req.variables and is_constant(rf, name):
            notes.append(f"{name} is the same at every grid point: not drawn (--var draws it)")
        elif _has_values(rf, name):
            drawable.append(name)
        else:
            notes.append(f"{name} has no valid value (every point failed or is non-finite): "
                         "not drawn")
    return drawable


def _plan_all(files: list[ResultFile], req: Request, ats: dict[str, dict[str, int]],
              names: dict[str, list[str]], notes: dict[str, list[str]]) -> list[Plan]:
    plan_file = REPORT_KINDS[req.kind].plan
    plans: list[Plan] = []
    for rf in files:
        if rf.all_failed:
            notes[rf.stem].append(_all_failed(rf))
            continue
        plans += plan_file(rf, _drawable(rf, names[rf.stem], req, notes[rf.stem]),
                           ats[rf.stem], req)
    return plans


def _explore_pages(plans: list[Plan], figures: list[dict[str, Any]], out_dir: Path,
                   ats: dict[str, dict[str, int]], req: Request) -> None:
    """Each phase diagram's interactive view (report/explore.py, docs/figures.md): one page
    per file and pair of axes, linked from the diagram's entry (``explore``: the page's file
    name). ``figures`` are the entries of ``plans``, in order."""
    pages: dict[tuple[str, str, str], Path | None] = {}
    for plan, entry in zip(plans, figures, strict=True):
        if plan.kind != "phase":
            continue
        key = (plan.rf.stem, plan.args["x"], plan.args["y"])
        if key not in pages:
            pages[key] = write_explore(plan.rf, out_dir, key[1], key[2], ats[plan.rf.stem],
                                       req.reduce)
        page = pages[key]
        if page is not None:
            entry["explore"] = page.name


def _draw_planned(plan: Plan, at: dict[str, int], req: Request, out_dir: Path,
                  fields: dict[str, str]) -> dict[str, Any]:
    """Draw and save ``plan``; its entry in the summary."""
    rf, kind = plan.rf, REPORT_KINDS[plan.kind]
    drawn = kind.draw(plan, at, req)
    name = figure_name(rf.stem, plan.kind, plan.var, req.fmt)
    save(drawn.fig, out_dir / name, req.fmt)
    counts = rf.point_counts()
    entry: dict[str, Any] = {
        "file": name, "kind": plan.kind, "var": plan.var, "source": str(rf.path),
        "caption": caption(drawn.description, drawn.notes, drawn.missing, fields,
                           str(rf.ds[plan.var].attrs.get("nan_meaning", "")),
                           counts["failed"] + counts["missing"]),
        "width_in": float(drawn.fig.get_figwidth()),
        "stem": rf.stem, "missing": drawn.missing,
    }
    entry.update({key: _finite(drawn.extra.get(key)) for key in kind.summary})
    return entry


def _remove_stale(out_dir: Path, figures: list[dict[str, Any]]) -> None:
    """A rewritten folder keeps no figure of an older report: the figure files its
    ``summary.json`` listed, if richlazy wrote it (:func:`.style.stale_files`)."""
    written = {str(f["file"]) for f in figures}
    for stale in stale_files(out_dir / "summary.json", written, _is_report_figure):
        stale.unlink()


def _is_report_figure(name: str) -> bool:
    """A name :func:`figure_name` or a scaling figure could have written."""
    return Path(name).suffix.lstrip(".") in FORMATS and Path(name).stem != ""


def _write_index(inputs: Sequence[Path], files: list[ResultFile], out_dir: Path,
                 figures: list[dict[str, Any]], names: dict[str, list[str]],
                 notes: dict[str, list[str]], fields: dict[str, dict[str, str]], fmt: str
                 ) -> dict[str, Any]:
    """Write ``summary.json`` and ``index.html``; return the summary."""
    stats = {rf.stem: {v: variable_stats(rf, v) for v in names[rf.stem]} for rf in files}
    summary = {"written_by": WRITER, "inputs": [str(p) for p in inputs], "figures": figures,
               "variables": stats,
               "notes": [f"{stem}: {text}" for stem, texts in notes.items() for text in texts]}
    summary = user_names(summary)
    (out_dir / "summary.json").write_text(
        json.dumps(summary, indent=2, allow_nan=False) + "\n", encoding="utf-8"
    )
    html = render_index([(rf, fields[rf.stem]) for rf in files], figures, stats, fmt, notes)
    (out_dir / "index.html").write_text(html, encoding="utf-8")
    return summary


def build_report(
    inputs: Sequence[Path],
    out_dir: Path,
    kind: str = "auto",
    variables: list[str] | None = None,
    x: str | None = None,
    y: str | None = None,
    at: dict[str, str] | None = None,
    reduce: str = "mean",
    fmt: str = "png",
    contours: bool = False,
) -> dict[str, Any]:
    """Draw the figures of ``inputs`` into ``out_dir`` with ``index.html`` and ``summary.json``.

    Returns the summary written to ``out_dir/summary.json``::

        {"written_by": "richlazy", "inputs": [path, ...],
         "figures": [{"file", "kind", "var", "source", "caption", "stem", "missing"}, ...],
         "variables": {stem: {var: {"min", "max", "argmin", "argmax", "long_name", "units"}}},
         "notes": ["<stem>: what was not drawn and why", ...]}

    (min/max as defined in :mod:`.summary`; theory figures add ``max_abs_diff``, scaling
    figures ``fits``.) Raises BadInput, before writing anything, on bad input. The kind's row
    of :data:`REPORT_KINDS` plans, checks and draws.
    """
    req = _request(kind, variables, x, y, at, reduce, fmt, contours)
    out_dir = _output_folder(inputs, out_dir)
    files = _load_all(inputs)
    _check_names(files, req.variables, req.x, req.y, req.at)
    ats = {rf.stem: resolve_at(rf, req.at) for rf in files}
    names = {rf.stem: [v for v in req.variables if v in rf.ds.data_vars]
             if req.variables else rf.variables for rf in files}
    notes: dict[str, list[str]] = {rf.stem: [] for rf in files}
    plans = _plan_all(files, req, ats, names, notes)
    REPORT_KINDS[req.kind].check(files, plans, notes)

    out_dir.mkdir(parents=True, exist_ok=True)
    fields = {rf.stem: provenance_fields(rf) for rf in files}
    with style():
        figures = [_draw_planned(plan, ats[plan.rf.stem], req, out_dir, fields[plan.rf.stem])
                   for plan in plans]
        _explore_pages(plans, figures, out_dir, ats, req)
        for whole in REPORT_KINDS[req.kind].whole:
            figures += whole(files, out_dir, req, fields)
    _remove_stale(out_dir, figures)
    return _write_index(inputs, files, out_dir, figures, names, notes, fields, req.fmt)


def _user_arg(arg: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if arg is None else {user_name(k, dimension=True): v for k, v in arg.items()}


def user_names(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` with the names a user sees in the files (engine/cf.py: ``solution_method``
    for the internal ``method``, ``step_time`` for ``time``): each figure's ``var``, the keys
    of ``variables`` and the dimensions of their ``argmin``/``argmax``."""
    figures = [{**f, "var": user_name(str(f["var"]))} if "var" in f else f
               for f in summary["figures"]]
    variables = {
        stem: {user_name(name): {**stats, "argmin": _user_arg(stats.get("argmin")),
                                 "argmax": _user_arg(stats.get("argmax"))}
               for name, stats in names.items()}
        for stem, names in summary["variables"].items()
    }
    return {**summary, "figures": figures, "variables": variables}
