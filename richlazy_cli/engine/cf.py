"""The CF layer of result files: what is written to disk, and how it is read back.

Inside richlazy a result keeps the names its models and engine use (``method``, ``rank``,
``history`` as a JSON list). On disk it follows the CF conventions (docs/engine.md, "Result
files", "CF conformance"): :func:`to_cf` is applied by every write, :func:`from_cf` by every
read, so that files of both layouts (``richlazy-1``, before this layer, and ``CF-1.11
richlazy-2``) open, report and merge alike.

What :func:`to_cf` does:

* ``Conventions = "CF-1.11 richlazy-2"``; ``title``, ``source`` and ``references`` (the
  papers the model implements);
* every ``units`` is UDUNITS-parseable: ``"1"`` for dimensionless numbers (and for counts
  such as steps and epochs, and richlazy's dimensionless gradient-flow time; the wall time
  ``elapsed`` is in ``"s"``); a word that is not a unit is kept as ``richlazy_units`` (``"steps"``,
  ``"time"``) and restored on reading;
* every dimension has a coordinate variable (an integer index, marked ``richlazy_index = 1``,
  where the model gives none);
* names that collide with xarray's API are renamed (:data:`RENAMES`: a dimension ``method``
  would be swallowed by ``.sel(method=...)``, ``rank`` is a method of ``Dataset``, a data
  variable ``time`` is not the time coordinate); ``richlazy_renamed`` records the map;
* a short ``label`` attribute (mathtext) beside every ``long_name``;
* ``history`` becomes CF's free text, one line per run, and the JSON record of the runs moves to
  ``richlazy_history``. Lines that other tools append to ``history`` are kept.
* ``status`` keeps its ``flag_values`` and ``flag_meanings`` (:mod:`.assemble`);
* no coordinate variable carries a ``_FillValue`` (CF 1.11 §2.5.1: coordinate variables have
  no missing values; :func:`coordinate_encoding`, applied by the writer);
* a coordinate ``time`` of model time (gradient-flow time, dimensionless) is declared as not
  calendar time: ``units = "1"``, its ``long_name``, no ``axis``, ``standard_name`` or
  ``calendar`` (CF 1.11 §1.4 and §4.4 identify a time coordinate by its units), a
  ``long_name`` other than ``time`` (:data:`MODEL_TIME_NAME` where the model gives that or
  none: cf_xarray reads a ``long_name`` as a ``standard_name``), and a ``comment`` that says
  so (:data:`MODEL_TIME_COMMENT`); reading restores the model's attributes.

What the IOOS compliance-checker (``compliance-checker --test=cf:1.11``) still reports, and
why, is listed in docs/engine.md ("The CF layer").
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import xarray as xr

CONVENTIONS = "CF-1.11 richlazy-2"
"""The ``Conventions`` attribute of files written now (CF, and richlazy's own schema)."""
OLD_CONVENTIONS = ("richlazy-1",)
"""Earlier layouts, still read."""

RENAMES = {"method": "solution_method", "rank": "sv_index"}
"""Internal name → name in the file, for dimensions and variables that collide with xarray's
API (``Dataset.sel(method=...)``, ``Dataset.rank``)."""
DATA_RENAMES = {"time": "step_time"}
"""Data variables (not dimensions) renamed in the file: a data variable ``time`` is not the
time coordinate CF tools would take it for."""

REFERENCES = {
    "kunin": "Kunin et al. 2024, Get rich quick: exact solutions reveal how unbalanced "
    "initializations promote rapid feature learning",
    "azulay": "Azulay et al. 2021, On the implicit bias of initialization shape: beyond "
    "infinitesimal mirror descent",
    "ren": "Ren et al. 2025, Emergence and scaling laws in SGD learning of shallow neural "
    "networks",
}
MODEL_REFERENCES = {
    "single-neuron": ("kunin", "azulay"),
    "two-layer": ("kunin",),
    "linear": ("kunin",),
    "diagonal": ("azulay",),
    "hermite": ("ren",),
    "rhm": ("kunin",),
    "grokking": ("kunin",),
    "cnn": ("kunin",),
}

UNIT_WORDS = {"time", "gradient-flow time", "steps", "step", "epochs", "epoch", "checkpoints"}
"""Units written by models that are not units: counts and dimensionless model time ("1")."""
TIME_WORDS = {"time", "gradient-flow time"}
"""The unit words of model time: a coordinate in them is dimensionless, not calendar time."""
MODEL_TIME_COMMENT = ("dimensionless model time (gradient-flow time), not calendar time: "
                      "units 1, no axis, standard_name or calendar")
"""The ``comment`` of a model-time coordinate in the file (removed on reading)."""
MODEL_TIME_NAME = "gradient-flow time"
"""The ``long_name`` in the file of a model-time coordinate that the model names ``time`` or
not at all (restored on reading from ``richlazy_long_name``)."""
CALENDAR_NAMES = {"", "time"}
"""``long_name`` values that readers take for calendar time (cf_xarray reads a ``long_name``
as a ``standard_name``)."""


def _references(model: str) -> str:
    keys = MODEL_REFERENCES.get(model, ("kunin", "azulay", "ren"))
    return "; ".join(REFERENCES[k] for k in keys)


_STOPS = (" (", ": ", "; ", ", ", " = ")


def _head(text: str) -> str:
    """``text`` up to its first clause break outside brackets (`` (``, ``:``, ``;``, ``,``,
    `` =``): ``NTK kernel distance S(0, t)`` stays whole, ``a (the output weight)`` is ``a``."""
    depth = 0
    for i, char in enumerate(text):
        if depth == 0 and i and any(text.startswith(stop, i) for stop in _STOPS):
            return text[:i]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
    return text


def short_label(name: str, long_name: str) -> str:
    """A short plot label (mathtext where the name is a symbol) for a variable."""
    from ..mathtext import symbol, to_mathtext

    sym = symbol(name)
    if sym is not None:
        return sym
    text = _head(long_name or name)
    if len(text) > 40:
        text = name.replace("_", " ")
    try:
        return to_mathtext(text)
    except Exception:  # a label is a convenience, never a reason to fail a write
        return text


def _cf_units(name: str, item: xr.Variable) -> dict[str, Any]:
    attrs = dict(item.attrs)
    if item.dtype.kind in "OUSb":
        attrs.pop("units", None)
        return attrs
    units = str(attrs.get("units", "") or "")
    if not units:
        attrs["units"] = "1"
    elif units in UNIT_WORDS:
        attrs["richlazy_units"] = units
        attrs["units"] = "1"
    return attrs


def coordinate_encoding(ds: xr.Dataset) -> dict[str, dict[str, Any]]:
    """The writer's encoding of every coordinate variable of ``ds`` (a variable named as its
    one dimension): no ``_FillValue``, which xarray would otherwise give a floating-point one
    (CF 1.11 §2.5.1: coordinate variables must not have missing values; a coordinate holds
    none, so its bits are the same)."""
    return {str(name): {"_FillValue": None} for name, item in ds.variables.items()
            if item.dims == (name,)}


def _is_model_time(name: str, item: xr.Variable, attrs: dict[str, Any]) -> bool:
    return (item.dims == (name,) and attrs.get("units") == "1"
            and (name == "time" or attrs.get("richlazy_units") in TIME_WORDS))


def _history_lines(history: list[Any]) -> list[str]:
    lines = []
    for entry in history:
        if not isinstance(entry, dict):
            continue
        command = entry.get("command") or []
        text = " ".join(str(c) for c in command) if isinstance(command, list) else str(command)
        lines.append(
            f"{entry.get('created', '?')} {entry.get('host', '?')}: {text} "
            f"(richlazy {entry.get('richlazy_version', '?')}, {entry.get('run', 'start')})"
        )
    return lines


def is_cf_layout(ds: xr.Dataset) -> bool:
    """Whether ``ds`` is in the file layout (written by :func:`to_cf`), not the internal one."""
    return str(ds.attrs.get("Conventions", "")).startswith("CF-")


def recordable(text: str) -> str:
    """``text`` as a file's attribute can hold it (UTF-8), every character kept.

    A byte of a name that is not UTF-8 (a file, folder or job file named in Latin-1) reaches
    Python as a lone surrogate U+DC80-U+DCFF (``surrogateescape``, :func:`os.fsdecode`). Such a
    character is written as its escape ``\\udcXX``, as the JSON attributes (``command``,
    ``inputs``, ``richlazy_history``) write it: ``os.fsencode(json.loads(...))`` gives the bytes
    back (docs/engine.md, "Hostile input").
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _recordable_attrs(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with every text attribute :func:`recordable` (a copy when one changes)."""
    def clean(attrs: dict[Any, Any]) -> dict[Any, Any]:
        return {k: recordable(v) if isinstance(v, str) else v for k, v in attrs.items()}

    holders: list[xr.Dataset | xr.Variable] = [ds, *ds.variables.values()]
    if all(recordable(v) is v for item in holders
           for v in item.attrs.values() if isinstance(v, str)):
        return ds
    out = ds.copy()
    out.attrs = clean(out.attrs)
    for item in out.variables.values():
        item.attrs = clean(item.attrs)
    return out


def to_cf(ds: xr.Dataset) -> xr.Dataset:
    """The file layout of an internal result (idempotent; see the module docstring); every
    text attribute :func:`recordable`."""
    if is_cf_layout(ds):
        return _recordable_attrs(ds)
    out = ds.copy()
    renames = {k: v for k, v in RENAMES.items() if (k in out.dims or k in out.variables)
               and v not in out.variables and v not in out.dims}
    renames.update({k: v for k, v in DATA_RENAMES.items()
                    if k in out.data_vars and k not in out.dims and v not in out.variables})
    if renames:
        out = out.rename(renames)
    for dim in out.dims:
        if dim not in out.variables:
            out = out.assign_coords({dim: xr.Variable(
                (dim,), np.arange(out.sizes[dim], dtype=np.int64),
                {"long_name": f"index along {dim}", "units": "1", "richlazy_index": 1},
            )})
    for name in list(out.variables):
        item = out.variables[name]
        attrs = _cf_units(str(name), item)
        attrs.setdefault("label", short_label(str(name), str(attrs.get("long_name", ""))))
        if _is_model_time(str(name), item, attrs):
            if str(attrs.get("long_name", "")).lower() in CALENDAR_NAMES:  # cf_xarray's T
                attrs["richlazy_long_name"] = attrs.get("long_name", "")
                attrs["long_name"] = MODEL_TIME_NAME
            attrs.setdefault("comment", MODEL_TIME_COMMENT)
        item.attrs = attrs
    attrs = dict(out.attrs)
    model, action = str(attrs.get("model", "")), str(attrs.get("action", ""))
    attrs["Conventions"] = CONVENTIONS
    attrs.setdefault("title", f"richlazy {model} {action}".strip())
    attrs.setdefault("source", f"richlazy {attrs.get('richlazy_version', '')}".strip())
    attrs.setdefault("references", _references(model))
    if renames:
        attrs["richlazy_renamed"] = json.dumps(renames)
    history = attrs.get("history")
    try:
        runs = json.loads(history) if isinstance(history, str) else None
    except json.JSONDecodeError:
        runs = None
    if isinstance(runs, list):
        lines = _history_lines(runs)
        extra = [line for line in str(attrs.pop("history_text", "")).splitlines()
                 if line.strip() and line not in lines]
        attrs["richlazy_history"] = history
        attrs["history"] = "\n".join([*lines, *extra])
    out.attrs = attrs
    return _recordable_attrs(out)


def from_cf(ds: xr.Dataset) -> xr.Dataset:
    """The internal layout of a result read from a file, whichever layout it was written in."""
    attrs = dict(ds.attrs)
    if not is_cf_layout(ds):
        return ds  # an old-layout file (richlazy-1): already internal
    try:
        renames = json.loads(attrs.pop("richlazy_renamed", "{}")) or {}
    except json.JSONDecodeError:
        renames = {}
    drop = [name for name, item in ds.coords.items() if item.attrs.get("richlazy_index") == 1]
    out = ds.drop_vars(drop)
    back = {new: old for old, new in renames.items() if new in out.dims or new in out.variables}
    if back:
        out = out.rename(back)
    for name in list(out.variables):
        item = out.variables[name]
        item_attrs = dict(item.attrs)
        if "richlazy_units" in item_attrs:
            item_attrs["units"] = item_attrs.pop("richlazy_units")
        elif item_attrs.get("units") == "1":
            item_attrs.pop("units")
        item_attrs.pop("label", None)
        if item_attrs.get("comment") == MODEL_TIME_COMMENT:
            item_attrs.pop("comment")
        if "richlazy_long_name" in item_attrs:
            item_attrs["long_name"] = item_attrs.pop("richlazy_long_name")
            if not item_attrs["long_name"]:
                item_attrs.pop("long_name")
        item.attrs = item_attrs
    if "richlazy_history" in attrs:
        attrs["history_text"] = attrs.get("history", "")
        attrs["history"] = attrs.pop("richlazy_history")
    for key in ("title", "source", "references", "Conventions"):
        attrs.pop(key, None)  # to_cf writes them anew
    out.attrs = attrs
    return out


def file_view(ds: xr.Dataset) -> xr.Dataset:
    """What a user sees of an internal result: the CF layout, history as text."""
    return to_cf(ds)


USER_NAMES = {**RENAMES, **DATA_RENAMES}
"""Internal name → the name a user sees in the file (and gives to ``report``)."""
INTERNAL_NAMES = {new: old for old, new in USER_NAMES.items()}
"""The name in the file → the internal name (the inverse of :data:`USER_NAMES`)."""


def internal_name(name: str) -> str:
    """The internal name of a dimension or variable a user names as the file does
    (``solution_method`` → ``method``); an internal or unknown name is returned as given."""
    return INTERNAL_NAMES.get(name, name)


def user_name(name: str, *, dimension: bool = False) -> str:
    """The name the file gives to an internal variable (``rank`` → ``sv_index``, the data
    variable ``time`` → ``step_time``) or, with ``dimension``, to an internal dimension
    (``method`` → ``solution_method``; a dimension ``time`` keeps its name); other names are
    returned as given."""
    return (RENAMES if dimension else USER_NAMES).get(name, name)
