"""The model protocol, the batch of configurations a model receives, and the registry.

A model is a small class registered under its command-line name. It declares its parameters
(:class:`~richlazy_cli.params.Param`) and implements ``solve(batch)`` and/or
``train(batch)``. A :class:`Batch` holds B configurations: every *batchable* parameter as an
array with a leading axis of length B, every other parameter as one plain value shared by the
whole batch. The method returns an :class:`xarray.Dataset` whose variables carry a leading
``point`` dimension of length B, then the model's own dimensions (``time``, ``step``,
``method``, ``dim``, ...). Every variable and coordinate has a ``long_name`` attribute and,
where meaningful, ``units``.

Models are pure: no I/O, no printing, no global random state. Randomness comes from
:func:`rng`, seeded from the ``seed`` parameter and a stream name, so a configuration's random
numbers never depend on which batch, chunk, worker or shard computes it.

A model may return a ``status`` variable over ``point`` (0 ok, 1 diverged); the engine adds
``elapsed`` and turns exceptions into status 2.

**The contract.** :func:`register` refuses a model that does not declare ``name``,
``summary``, ``actions``, ``params`` and ``examples``; that lists an action it does not
implement; whose parameter names repeat; whose defaults fail their own validation; or whose
examples name unknown parameters or fail :meth:`Model.resolve`. What a model *computes* is held
to the contract by the suite ``tests/models/test_contract.py``, which runs every registered model's
examples (schema, batch against single configurations, seeds, ranges, cost, file round trip).
docs/engine.md states the contract and the result schema.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import xarray as xr

from ..errors import BadInput
from ..numerics import compute
from ..numerics.compute import Implementation, MissingRequirement
from ..numerics.duck_arrays import defer
from ..numerics.randomness import rng  # noqa: F401 (re-export: models import rng from here)
from ..params import Param, deprecated, suggest

defer()  # building a model's Dataset imports neither Dask nor Pint (numerics/duck_arrays.py)

Progress = Callable[[float], None]
"""Callback a long kernel calls with the fraction of its work done (0..1)."""

ACTIONS: tuple[str, ...] = ("solve", "train")
"""The actions a model may implement (:meth:`Model.run` dispatches them)."""

@dataclass
class Batch:
    """B configurations of one model.

    ``values[name]`` is an array of shape ``(B, ...)`` for a batchable parameter and the plain
    value (shared by all B configurations) for any other parameter.
    """

    size: int
    values: dict[str, Any]
    batchable: frozenset[str] = field(default_factory=frozenset)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def column(self, name: str) -> np.ndarray:
        """The parameter as an array with a leading batch axis, whether batchable or not."""
        value = self.values[name]
        if name in self.batchable:
            return np.asarray(value)
        arr = np.asarray(value)
        return np.broadcast_to(arr, (self.size, *arr.shape))

    def point(self, i: int) -> dict[str, Any]:
        """The parameters of configuration ``i`` as a plain dict."""
        return {k: (v[i] if k in self.batchable else v) for k, v in self.values.items()}

    @classmethod
    def from_points(cls, model: type[Model], points: list[Mapping[str, Any]]) -> Batch:
        """Stack validated parameter dicts that agree on every non-batchable parameter (of
        their implementation: :meth:`Model.batchable_names`)."""
        if not points:
            raise ValueError("empty batch")
        first = points[0]
        batchable = model.batchable_names(first)
        values: dict[str, Any] = {}
        for name, value in first.items():
            if name in batchable:
                values[name] = _stack([pt[name] for pt in points], name)
            else:
                for pt in points[1:]:
                    if pt[name] is not value and not values_equal(pt[name], value):
                        raise ValueError(f"non-batchable parameter {name} differs within a batch")
                values[name] = value
        return cls(size=len(points), values=values, batchable=batchable)


def _stack(column: list[Any], name: str) -> np.ndarray:
    if any(v is None for v in column):
        if all(v is None for v in column):
            return np.full(len(column), np.nan)
        raise ValueError(f"batchable parameter {name} is given for some points only")
    return np.stack([np.asarray(v) for v in column])


def values_equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if a is None or b is None:
            return False
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and bool(np.array_equal(a, b))
    return bool(a == b)


def var(dims: tuple[str, ...], data: Any, long_name: str, units: str = "") -> xr.Variable:
    """An xarray variable with the ``long_name`` (and ``units``) attributes the schema requires."""
    attrs = {"long_name": long_name}
    if units:
        attrs["units"] = units
    return xr.Variable(dims, data, attrs)


_HOOKS = ("cost", "probe", "output_bytes", "working_bytes", "max_workers", "stops_early",
          "stop_share")
"""The parts of a :class:`Footprint` that :meth:`Model.footprint` builds from a family's
hooks, each declared as the private class method ``_NAME``."""


def _hook(cls: type, part: str) -> Callable[..., Any] | None:
    """The family's hook for one part of its footprint (:data:`_HOOKS`), or None."""
    found: Callable[..., Any] | None = getattr(cls, f"_{part}", None)
    return found


def _by_action(hook: Callable[..., Any]) -> bool:
    """Whether a family's cost hook declares the action (``_cost(values, action)``)."""
    try:
        return "action" in inspect.signature(hook).parameters
    except (TypeError, ValueError):  # a callable without a signature
        return False


@dataclass(frozen=True)
class Footprint:
    """What one configuration takes, declared by its model (:meth:`Model.footprint`).

    ``cost`` is a rough amount of work, positive and finite, in the model's own units: the dry
    run (``sweep --dry-run``) times the probe and scales by the ratio of costs
    (docs/estimates.md). ``output_bytes`` is the bytes of the configuration's outputs (every
    variable of :meth:`Model.run`'s result for one point, uncompressed), from the parameters
    that set their shapes, or None when undeclared (then measured on the first chunk);
    ``working_bytes`` the peak bytes computing it takes besides its outputs (parameters,
    optimiser state, activations, data), or None; the engine refuses, before anything runs, a
    result or a run that would not fit (engine/footprint.py). ``workers`` is the most workers
    that can compute such configurations at once on one machine (None: no limit).
    :attr:`probe` is a shorter configuration of the same kind for the dry run to time: it keeps
    every size the cost depends on except the length (steps, time); it is built only when
    asked for, so that a footprint evaluated once per case of a grid stays cheap.
    ``stops_early`` says, in a phrase, that such a configuration may stop before the length
    its cost prices, at a point nothing predicts (an accuracy reached), and ``stop_share``
    is the share of its cost the dry run then prices it at, the model's prior for where it
    stops; the dry run prints its estimate with that phrase and the bound of no early stop
    beside it (None and 1: the cost prices the run as it will go, its early stops included
    where it has any).
    """

    cost: float = 1.0
    output_bytes: float | None = None
    working_bytes: float | None = None
    workers: int | None = None
    shorten: Callable[[], dict[str, Any]] | None = field(default=None, repr=False,
                                                         compare=False)
    stops_early: str | None = None
    stop_share: float = 1.0

    @property
    def expected_cost(self) -> float:
        """The cost the dry run prices: :attr:`cost`, times :attr:`stop_share` (1 unless
        the configuration may stop early at a point nothing predicts)."""
        return float(self.cost) * float(self.stop_share)

    @property
    def probe(self) -> dict[str, Any] | None:
        """The shortened configuration, or None when none is declared (the dry run then times
        the configuration itself)."""
        return None if self.shorten is None else self.shorten()


class Model:
    """Base class of every model. Subclasses set the class variables and implement actions."""

    name: ClassVar[str]
    """The command-line name (``richlazy solve NAME``)."""
    summary: ClassVar[str]
    """One line for ``richlazy models``."""
    actions: ClassVar[tuple[str, ...]]
    """The actions implemented, among :data:`ACTIONS`."""
    params: ClassVar[tuple[Param, ...]]
    """Every parameter, with type, default, unit, range and help."""
    examples: ClassVar[dict[str, tuple[dict[str, Any], ...]]]
    """For each action, a few small configurations (parameter overrides) that run in well under
    a second each, used by the contract suite. Give at least two per action that share every
    non-batchable parameter and differ in a batchable one (so that they batch together), and,
    in a model with a ``seed`` parameter, at least one with another seed. A model with a
    ``seed`` parameter draws random numbers from it (and only from it) in every action."""
    requires: ClassVar[tuple[str, ...]] = ()
    """Modules every run of the model imports (``("torch",)``); a missing one is bad input
    naming the extra that provides it (:func:`richlazy_cli.numerics.compute.require`), checked after
    the model's own rules, so that the model is listed, and its examples validated, without."""
    implementations: ClassVar[tuple[Implementation, ...]] = ()
    """The family's implementations (docs/engine.md, "Implementations and devices"), in order
    of preference: an action runs on the first that implements it unless the
    ``implementation`` parameter names another. Empty: one implicit CPU implementation."""
    aliases: ClassVar[dict[str, dict[str, str]]] = {}
    """A parameter's older, deprecated names: name → action → the parameter it stands for,
    accepted so that an old job file still runs (with a
    :class:`~richlazy_cli.params.RichlazyDeprecationWarning` naming the parameter) and an old
    result file still reads. A result records the parameter's own name, never the older one.
    The families' older names of what a run records (``n_times``, ``checkpoints``, ...) are
    declared here (:data:`RECORD_VOCABULARY`, docs/engine.md, "Records")."""
    overrides: ClassVar[dict[str, tuple[str, ...]]] = {}
    """Parameters that, given, set others: name → the parameters whose values it replaces
    (hermite's explicit teacher weights ``a`` replace the power law's ``beta``). Giving or
    sweeping both is refused (:func:`enter`), since the replaced value would be computed over
    and the result would label its points by values they did not use."""
    implementation_aliases: ClassVar[dict[str, dict[str, dict[str, tuple[str, ...]]]]] = {}
    """Older, deprecated parameters that chose the implementation: per action, parameter →
    value → the implementations that value allows (the first that does the action is
    chosen). Given, each becomes ``implementation`` with a
    :class:`~richlazy_cli.params.RichlazyDeprecationWarning` naming it; a result records
    ``implementation`` only, and one written when they were parameters of their own reads
    as written (:meth:`as_named_now`)."""

    # -- parameters -------------------------------------------------------------------------
    @classmethod
    def param(cls, name: str, action: str | None = None, *, warn: bool = True) -> Param:
        """The parameter called ``name``, or named by an older name (:attr:`aliases`) for
        ``action`` (without an action, an older name of one parameter for every action),
        which is deprecated: said by :func:`~richlazy_cli.params.deprecated` unless ``warn``
        is False (a name already said)."""
        given, targets = name, cls.aliases.get(name, {})
        if action is not None and action in targets:
            name = targets[action]
        elif action is None and len(set(targets.values())) == 1:
            name = next(iter(targets.values()))
        for p in cls.params:
            if p.name == name:
                if warn and name != given:
                    deprecated(given, name)
                return p
        if targets and action is not None:  # another action's older name
            named = ", ".join(f"{target} for {a}" for a, target in targets.items())
            raise BadInput(f"model {cls.name}: {name} is the older name of {named}, not a "
                           f"parameter of {action}")
        raise BadInput(
            f"model {cls.name} has no parameter {name!r}"
            + suggest(name, [*(p.name for p in cls.params), *cls.aliases])
        )

    @classmethod
    def name_of(cls, name: str, action: str) -> str:
        """The parameter that input ``name`` sets for ``action``, silently: its own name, the
        parameter an older name stands for (:attr:`aliases`), or ``implementation`` for an
        older parameter that chose it (:attr:`implementation_aliases`). BadInput for an
        unknown name."""
        if any(name in older for older in cls.implementation_aliases.values()):
            return "implementation"
        return cls.param(name, action, warn=False).name

    @classmethod
    def aliases_of(cls, name: str) -> dict[str, tuple[str, ...]]:
        """The older names of parameter ``name`` (:attr:`aliases`; for ``implementation``,
        :attr:`implementation_aliases`), each with the actions it names it for: what
        ``richlazy models NAME`` shows beside it as deprecated."""
        found = {alias: tuple(a for a, target in targets.items() if target == name)
                 for alias, targets in cls.aliases.items() if name in targets.values()}
        if name == "implementation":
            for action, aliases in cls.implementation_aliases.items():
                for alias in aliases:
                    found[alias] = (*found.get(alias, ()), action)
        return found

    @classmethod
    def as_named_now(cls, action: str, named: Mapping[str, Any], *, swept: bool = False
                     ) -> dict[str, Any]:
        """``named`` (values by parameter name, as a result or a parts folder recorded them,
        perhaps under a family's older names) under the names of now, silently (reading an
        old result file is not a deprecated use): an older name of ``action``
        (:attr:`aliases`) becomes the parameter it stands for, unless that parameter is there
        too. An older name of other actions only is left out: it was once a parameter of its
        own that ``action`` did not read (``linear``'s ``checkpoints`` in a solve). With
        ``swept`` (grid dimensions) nothing is left out, so that a grid never loses a
        dimension. A parameter that once chose the implementation
        (:attr:`implementation_aliases`, recorded beside ``implementation``) is left out, its
        choice recorded as ``implementation`` where that was not given. Other names stay as
        they are."""
        older = {alias for aliases in cls.implementation_aliases.values() for alias in aliases}
        out: dict[str, Any] = {}
        for name, value in named.items():
            targets = cls.aliases.get(name)
            if name in older and not swept and "implementation" in named:
                mapping = cls.implementation_aliases.get(action, {}).get(name, {})
                able = [i.name for i in cls.implementations
                        if i.name in mapping.get(str(value), ()) and action in i.actions]
                if able and named["implementation"] is None:  # it chose the implementation
                    out["implementation"] = able[0]
                continue
            if name == "implementation" and name in out:
                continue
            if targets is None:
                out[name] = value
            elif action in targets:
                if targets[action] not in named:
                    out[targets[action]] = value
            elif swept:
                out[name] = value
        return out

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        return {p.name: p.default for p in cls.params}

    @classmethod
    def given(cls, action: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """The defaults overlaid with ``params``, each parsed (a string, as typed on the
        command line) or coerced (any other value); BadInput for an unknown action or
        parameter, or a value its parameter refuses. Nothing is derived or cross-checked yet:
        that is :meth:`prepare`, once per case."""
        if action not in cls.actions:
            raise BadInput(
                f"model {cls.name} has no action {action!r}; it supports {', '.join(cls.actions)}"
            )
        values = cls.defaults()
        named: dict[str, str] = {}
        older = {alias for aliases in cls.implementation_aliases.values() for alias in aliases}
        choosing: dict[str, str] = {}
        for name, value in params.items():
            if name in older:
                choosing[name] = str(value)
                continue
            p = cls.param(name, action)
            if p.name in named:
                raise BadInput(f"parameter {p.name} is given twice (as {named[p.name]} and "
                               f"as {name})")
            named[p.name] = name
            try:
                values[p.name] = p.parse(value) if isinstance(value, str) else p.coerce(value)
            except BadInput as exc:
                if name == p.name:
                    raise
                raise BadInput(f"{exc} (given as {name})") from None
        if choosing:
            _implementation_of_older(cls, action, choosing, values, "implementation" in named)
        return values

    @classmethod
    def resolve(cls, action: str, given: Mapping[str, Any]) -> dict[str, Any]:
        """One configuration's values, exactly as a run receives them: :func:`enter` without a
        grid (:meth:`given`, then :meth:`prepare`). The engine's jobs enter by the same
        function with their grid (:meth:`richlazy_cli.engine.job.Job.build`), so that a job
        without a grid records what this returns (docs/engine.md, "Validation")."""
        return enter(cls, action, given).values

    @classmethod
    def prepare(cls, action: str, values: dict[str, Any]) -> None:
        """Make ``values`` what the model receives, in place, or raise BadInput: the one
        validation step, which the engine runs once per distinct case of a grid.

        In order: the implementation is chosen from :attr:`implementations` (its actions,
        methods, dtypes and devices enforced; ``implementation`` filled in);
        :meth:`derive` fills the derived values; :meth:`check` gives its verdict; the
        requirements (:attr:`requires` and the implementation's) are import-checked; the
        device is resolved (``cuda`` without a GPU is bad input,
        :data:`richlazy_cli.numerics.compute.NO_GPU`). Not meant to be overridden: a family states
        its rules in :meth:`derive` and :meth:`check`.
        """
        impl = None
        if cls.implementations and action in cls.actions:
            impl = _choose(cls, action, values)
        cls.derive(action, values)
        cls.check(action, values)
        what = f"model {cls.name}"
        if impl is not None and len(cls.implementations) > 1:
            what += f" (implementation {impl.name})"
        compute.require(what, (*cls.requires, *(impl.requires if impl else ())))
        if "device" in values and (impl is None or impl.on_devices):
            compute.resolve_device(str(values["device"]))

    @classmethod
    def derive(cls, action: str, values: dict[str, Any]) -> None:
        """Fill, in place, the values that follow from others: sizes read from a data file,
        a default that depends on another parameter. Runs before :meth:`check`, so it fills
        only what it can and leaves the verdict to the check; BadInput only for what it
        cannot derive from (an unreadable data file, contradictory inputs). Default: nothing.
        """

    @classmethod
    def check(cls, action: str, values: Mapping[str, Any]) -> None:
        """The cross-parameter verdict on derived values: one line of BadInput naming the
        parameter, or nothing. Pure: it changes nothing and reads no file. (A model written
        before :meth:`derive` existed may still fill values here; :meth:`prepare` hands it
        the values to change.) Default: nothing."""

    @classmethod
    def footprint(cls, action: str, values: Mapping[str, Any]) -> Footprint:
        """What one configuration like ``values`` takes (:class:`Footprint`): its work, the
        bytes of its outputs and of its working memory, the shortened configuration the dry
        run times, and the most workers that can compute it at once.

        Built from the parts a family declares as private class methods (:data:`_HOOKS`):
        ``_cost(values)`` (or ``_cost(values, action)``, for a family that prices its
        actions by different models), ``_output_bytes(action, values)``, ``_working_bytes(action,
        values)``, ``_probe(values)``, ``_max_workers(values)``, ``_stops_early(values)``
        and ``_stop_share(values)``.
        A part left out takes its default: cost 1, bytes undeclared, the configuration
        itself as its probe, no unpredicted early stop (a share of 1), and one
        worker per GPU where the configuration's implementation runs on a device and its
        ``device`` is not ``cpu`` (:meth:`device_workers`). A family overrides this method
        only to declare something these parts cannot.
        """
        cost = _hook(cls, "cost")
        output = _hook(cls, "output_bytes")
        working = _hook(cls, "working_bytes")
        workers = _hook(cls, "max_workers")
        shorten = _hook(cls, "probe")
        stops = _hook(cls, "stops_early")
        share = _hook(cls, "stop_share")
        return Footprint(
            1.0 if cost is None else float(cost(values, action=action) if _by_action(cost)
                                           else cost(values)),
            None if output is None else output(action, values),
            None if working is None else working(action, values),
            cls.device_workers(values, action) if workers is None else workers(values),
            (lambda: dict(values)) if shorten is None else (lambda: dict(shorten(values))),
            None if stops is None else stops(values),
            1.0 if share is None else float(share(values)))

    @classmethod
    def device_workers(cls, values: Mapping[str, Any], action: str | None = None) -> int | None:
        """One worker per GPU where ``values``' implementation runs on a device and its
        ``device`` is not ``cpu`` (:func:`richlazy_cli.numerics.compute.gpu_workers`), else None (no
        limit): the ``workers`` of every model's :class:`Footprint`."""
        impl = cls.implementation(values, action)
        if impl is None or not impl.on_devices:
            return None
        return compute.gpu_workers(compute.device_of(values))

    @classmethod
    def implementation(cls, values: Mapping[str, Any], action: str | None = None
                       ) -> Implementation | None:
        """The row of :attr:`implementations` that ``values`` run on (None without a table):
        the one named by ``implementation``, else the action's first."""
        if not cls.implementations:
            return None
        name = values.get("implementation")
        if name is None:
            action = action or cls.actions[0]
            name = _choose(cls, action, dict(values)).name
        return next(impl for impl in cls.implementations if impl.name == name)

    @classmethod
    def batchable_names(cls, values: Mapping[str, Any], action: str | None = None
                        ) -> frozenset[str]:
        """The parameters in which the configurations of one batch like ``values`` (prepared)
        may differ: the family's batchable parameters and those that ``values``'s
        implementation batches over besides (``Implementation.batchable``; docs/engine.md,
        "Batching over more on one implementation"). A point's implementation is chosen by
        its non-batchable values, so the configurations of a batch share it."""
        names = frozenset(p.name for p in cls.params if p.batchable)
        if not any(impl.batchable for impl in cls.implementations):
            return names
        impl = cls.implementation(values, action)
        return names | frozenset(impl.batchable) if impl is not None else names

    @classmethod
    def load_native(cls) -> None:
        """Load the native libraries that computing loads lazily (compiled kernels, a second
        BLAS). The engine calls this before it holds BLAS at one thread, so that its limit
        covers them too. Default: nothing."""

    # -- actions ----------------------------------------------------------------------------
    def solve(self, batch: Batch, progress: Progress | None = None) -> xr.Dataset:
        """The ``solve`` action: the function the batch's implementation row names
        (:meth:`dispatch`), unless the family overrides this method (a family without a
        table of implementations does)."""
        return self.dispatch("solve", batch, progress)

    def train(self, batch: Batch, progress: Progress | None = None) -> xr.Dataset:
        """The ``train`` action, as :meth:`solve`."""
        return self.dispatch("train", batch, progress)

    def run(self, action: str, batch: Batch, progress: Progress | None = None) -> xr.Dataset:
        if action == "solve":
            return self.solve(batch, progress)
        if action == "train":
            return self.train(batch, progress)
        raise BadInput(f"unknown action {action!r}")

    def dispatch(self, action: str, batch: Batch, progress: Progress | None = None
                 ) -> xr.Dataset:
        """The one dispatch from an implementation row to its code (docs/engine.md,
        "Implementations and devices").

        The row the batch's values run on (:meth:`implementation`: the ``implementation``
        parameter, else the action's first) names its function (``Implementation.run``);
        the device is resolved and, for a row that requires torch, the call runs inside the
        torch session (:func:`richlazy_cli.numerics.compute.placed`); the function is
        called as ``function(model, batch, progress, placement)``; a torch row's result
        is stamped with its provenance (:data:`richlazy_cli.numerics.compute.PROVENANCE_KEYS`).
        A family compares no implementation names: a new implementation is its module and
        its row."""
        cls = type(self)
        impl = cls.implementation(batch.values, action)
        function = None if impl is None else impl.function(action, cls)
        if impl is None or function is None:
            raise NotImplementedError(f"model {cls.name}: no function computes {action} on "
                                      f"implementation {impl.name if impl else '(none)'}")
        with compute.placed(impl, batch.values) as placement:
            data = function(self, batch, progress, placement)
        data.attrs.update(placement.provenance)
        return data


# -- the one entrance -----------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """What :func:`enter` returns: the values and, with a grid, its prepared cases."""

    values: dict[str, Any]
    """Without a grid, the prepared values a run receives; with one, the given values (every
    default, each parameter parsed) that each grid point overlays."""
    cases: Any = None
    """What the grid's ``prepare_cases`` returned (the engine's tree of prepared cases)."""


def enter(model: type[Model], action: str, params: Mapping[str, Any], *,
          swept: Sequence[str] = (),
          prepare_cases: Callable[[dict[str, Any]], Any] | None = None) -> Entry:
    """The one entrance of a configuration or a job into a model: given, (grid), prepare.

    1. :meth:`Model.given`: the defaults overlaid with ``params``, each parsed or coerced
       (an older name under its parameter's name, deprecated);
    2. a parameter both given and ``swept`` (the grid's parameter names) is refused, and so
       is one given or swept beside a parameter that replaces it (:attr:`Model.overrides`);
    3. :meth:`Model.prepare`, the one validation step: without a grid once, in place, on the
       values; with one, ``prepare_cases(values)`` runs it once per distinct case of the
       grid over them (the engine's :class:`~richlazy_cli.engine.validate.CaseTree`) and
       raises the first bad case's BadInput.

    :meth:`Model.resolve` is this without a grid; the engine's jobs
    (:meth:`richlazy_cli.engine.job.Job.build`), which the command line and the Python API
    in ``richlazy/`` build, enter here with theirs, so that nothing reaches a model by
    another road (docs/engine.md, "Validation"). The grid itself is the caller's: models
    know nothing of the engine.
    """
    values = model.given(action, params)
    given = {model.name_of(name, action) for name in params}
    for name in swept:
        if name in given:
            raise BadInput(f"parameter {name} is both fixed (-p) and swept (-g)")
    named = given | set(swept)
    for name, replaced in model.overrides.items():
        if name in swept or (name in given and values.get(name) is not None):
            for other in replaced:
                if other in named:
                    raise BadInput(f"parameter {other}: {name} replaces it (give one of "
                                   f"{name} and {other}, not both)")
    if prepare_cases is None:
        model.prepare(action, values)
        return Entry(values)
    return Entry(values, prepare_cases(values))


# -- implementations, requirements, devices ------------------------------------------------
def _implementation_of_older(cls: type[Model], action: str, choosing: Mapping[str, str],
                             values: dict[str, Any], given: bool) -> None:
    """The ``implementation`` that the older parameters ``choosing`` (by name, their values:
    :attr:`Model.implementation_aliases`) choose for ``action``, set in ``values`` in place;
    each is deprecated (:func:`~richlazy_cli.params.deprecated`, naming the implementation
    its value chooses). With ``given``, ``values["implementation"]`` was given too and they
    must agree with it. An older parameter of other actions only, which ``action`` never
    read, is said and left out. BadInput naming the parameter for a value it never took,
    an implementation that does not do ``action``, or two that contradict."""
    table = cls.implementations
    allowed = ([str(values["implementation"])] if given
               else [i.name for i in table if action in i.actions])
    by = "implementation"
    for alias, value in choosing.items():
        mapping = cls.implementation_aliases.get(action, {}).get(alias)
        if mapping is None:
            deprecated(alias, "implementation")
            continue
        if value not in mapping:
            raise BadInput(f"parameter {alias}: {value} is not one of {', '.join(mapping)}")
        able = [i.name for i in table if i.name in mapping[value] and action in i.actions]
        deprecated(alias, f"implementation = {able[0]}" if able else "implementation")
        if not able:
            doing = ", ".join(i.name for i in table if action in i.actions)
            raise BadInput(f"parameter {alias}: {value} (implementation "
                           f"{' or '.join(mapping[value])}) does not {action}; implementations "
                           f"that {action}: {doing}")
        narrowed = [name for name in allowed if name in able]
        if not narrowed:
            raise BadInput(f"parameter {alias}: {value} contradicts {by} = {allowed[0]}")
        allowed, by = narrowed, alias
    if by != "implementation":
        values["implementation"] = allowed[0]


def _choose(cls: type[Model], action: str, values: dict[str, Any]) -> Implementation:
    """The implementation of ``values`` for ``action``; fills ``values`` in place. BadInput
    naming the parameter for a combination the table lacks."""
    table = cls.implementations
    chosen = values.get("implementation")
    allowed = [str(chosen)] if chosen is not None else [impl.name for impl in table]
    doing = [name for name in allowed
             if action in next(i for i in table if i.name == name).actions]
    if not doing:
        able = ", ".join(i.name for i in table if action in i.actions)
        raise BadInput(f"parameter implementation: {allowed[0]} does not {action}; "
                       f"implementations that {action}: {able}")
    impl = next(i for i in table if i.name == doing[0])
    method = values.get("method")
    if impl.methods is not None and method is not None and method not in impl.methods:
        raise BadInput(f"parameter method: implementation {impl.name} integrates with "
                       f"{', '.join(impl.methods)}, not {method}")
    dtype = values.get("dtype")
    if impl.dtypes is not None and dtype is not None and dtype not in impl.dtypes:
        raise BadInput(f"parameter dtype: implementation {impl.name} computes in "
                       f"{', '.join(impl.dtypes)}, not {dtype}")
    device = values.get("device")
    if device is not None and device != "auto" and device not in impl.devices:
        on = [i.name for i in table if device in i.devices and action in i.actions]
        raise BadInput(f"parameter device: {device} needs implementation "
                       f"{' or '.join(on) or '(none)'}; {impl.name} runs on the cpu")
    if any(p.name == "implementation" for p in cls.params):  # a one-row table: none
        values["implementation"] = impl.name
    return impl


RECORD_VOCABULARY: dict[str, str] = {
    "n_records": "how many points a run records (0 and the last included or not, as each "
                 "family's parameter says)",
    "records": "the recorded points themselves (steps or epochs), given explicitly",
}
"""The one vocabulary for what a run records: the names of the parameters of every family
that records (docs/engine.md, "Records"), which results record and messages name; each
family's older, deprecated name for them is declared in :attr:`Model.aliases`."""


# -- the contract ---------------------------------------------------------------------------
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
"""What a model's name may be: it becomes part of file names (``results/NAME-solve-*.h5``)."""
_REQUIRED: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("name", str),
    ("summary", str),
    ("actions", tuple),
    ("params", tuple),
    ("examples", dict),
)


def check_contract(cls: type[Model]) -> None:
    """Raise one-line :class:`BadInput` naming the model and the rule it breaks, if any.

    The rules: the class attributes of :data:`_REQUIRED` are declared, with those types; every
    listed action is one of :data:`ACTIONS` and is implemented (overridden, not the base
    class's, or named by every implementation row that lists it, a method name naming a
    method of the model); parameter names are unique, and :attr:`Model.overrides` names only
    parameters; every default passes its own
    :meth:`Param.coerce`; ``examples`` gives every listed action (and nothing else) at
    least one example, each a dict of known parameter names that passes
    :meth:`Model.resolve`.
    """
    label = getattr(cls, "name", None) if isinstance(getattr(cls, "name", None), str) else None
    label = label or f"{cls.__module__}.{cls.__qualname__}"

    def refuse(rule: str) -> None:
        raise BadInput(f"model {label}: {rule}")

    for attr, kind in _REQUIRED:
        value = getattr(cls, attr, None)
        if value is None:
            refuse(f"the class attribute {attr!r} is missing")
        if not isinstance(value, kind):
            refuse(f"the class attribute {attr!r} must be a {kind.__name__}")  # type: ignore[union-attr]
    if not cls.name.strip():
        refuse("the name is empty")
    if not MODEL_NAME.fullmatch(cls.name):
        refuse("the name must be letters, digits, '-' and '_', starting with a letter or "
               "digit (it names files and folders: no path separators, no '..')")
    if not cls.actions:
        refuse("no action is listed")
    for action in cls.actions:
        if action not in ACTIONS:
            refuse(f"action {action!r} is not one of {', '.join(ACTIONS)}")
        if getattr(cls, action) is getattr(Model, action):
            rows = [impl for impl in cls.implementations if action in impl.actions]
            named = [impl.function_name(action) for impl in rows]
            if not rows or any(name is None for name in named):
                refuse(f"action {action!r} is listed but {action}() is not implemented "
                       "(nor named by every implementation row that lists it)")
            for impl, name in zip(rows, named, strict=True):
                if isinstance(name, str) and ":" not in name and not callable(
                        getattr(cls, name, None)):
                    refuse(f"implementation {impl.name} names {name!r} for {action}, "
                           "which is no method of the model")
    names: set[str] = set()
    for p in cls.params:
        if not isinstance(p, Param):
            refuse(f"params must hold Param objects, got {type(p).__name__}")
        if p.name in names:
            refuse(f"parameter {p.name!r} is declared twice")
        names.add(p.name)
        try:
            p.coerce(p.default)
        except BadInput as exc:
            refuse(f"the default of parameter {p.name!r} fails its own validation ({exc})")
    for name, replaced in cls.overrides.items():
        unknown = [n for n in (name, *replaced) if n not in names]
        if unknown:
            refuse(f"overrides names {unknown[0]!r}, which is no parameter")
    for alias, targets in cls.aliases.items():
        if alias in names:
            refuse(f"the alias {alias!r} is also a parameter's name")
        for action, target in targets.items():
            if action not in cls.actions or target not in names:
                refuse(f"the alias {alias!r} names no parameter {target!r} of {action!r}")
    for action, older in cls.implementation_aliases.items():
        for alias, mapping in older.items():
            if alias in names or action not in cls.actions:
                refuse(f"the older parameter {alias!r} of {action!r} is a parameter's name, "
                       "or its action is not listed")
            for allowed in mapping.values():
                if not set(allowed) <= {impl.name for impl in cls.implementations}:
                    refuse(f"the older parameter {alias!r} names an implementation the "
                           "table lacks")
    for action in cls.examples:
        if action not in cls.actions:
            refuse(f"examples are given for {action!r}, which is not a listed action")
    for action in cls.actions:
        examples = cls.examples.get(action)
        if not isinstance(examples, tuple) or not examples:
            refuse(f"examples[{action!r}] must be a non-empty tuple of parameter dicts")
        for i, example in enumerate(examples):  # type: ignore[arg-type]
            where = f"example {i} of {action}"
            if not isinstance(example, dict):
                refuse(f"{where} is not a dict")
            for key in example:
                if key not in names:
                    refuse(f"{where} names an unknown parameter {key!r}" + suggest(key, [*names]))
            try:
                cls.resolve(action, example)
            except MissingRequirement:
                pass  # the model's own rules passed; a run is refused where torch is missing
            except BadInput as exc:
                refuse(f"{where} fails validation ({exc})")


# -- registry -------------------------------------------------------------------------------
_REGISTRY: dict[str, type[Model]] = {}


def register(cls: type[Model]) -> type[Model]:
    """Class decorator: check the model's contract (:func:`check_contract`), then make it
    available under ``cls.name``. A second class under a taken name is refused."""
    check_contract(cls)
    if not cls.__module__.startswith(f"{__package__}."):
        _import_builtin(cls.name)  # a package's own model of that name registers first
    known = _REGISTRY.get(cls.name)
    if known is not None and (known.__module__, known.__qualname__) != (
        cls.__module__,
        cls.__qualname__,
    ):
        raise BadInput(
            f"model {cls.name}: the name is taken by {known.__module__}.{known.__qualname__}"
        )
    _REGISTRY[cls.name] = cls
    return cls


def _discover() -> None:
    """Import every model module of the package, then those named in ``RICHLAZY_MODELS``.

    ``RICHLAZY_MODELS=mypkg.models,other`` (comma-separated importable modules) adds a
    researcher's own models; workers inherit the variable, so sweeps find them too.
    """
    package = importlib.import_module("richlazy_cli.models")
    for info in pkgutil.iter_modules(package.__path__):
        if info.name not in ("base", "params") and not info.name.startswith("_"):
            importlib.import_module(f"richlazy_cli.models.{info.name}")
    _researchers_models()


def _import_builtin(name: str) -> None:
    """Import the package's family module of model ``name`` if there is one (model ``a-b``
    lives in ``richlazy_cli.models.a_b``); nothing otherwise."""
    module = name.replace("-", "_")
    if module.isidentifier() and module not in ("base", "params") and not module.startswith("_"):
        qualified = f"richlazy_cli.models.{module}"
        if qualified not in sys.modules and importlib.util.find_spec(qualified) is not None:
            importlib.import_module(qualified)


def _researchers_models() -> None:
    """Load the installed packages' models (:data:`ENTRY_POINTS`), then the modules named in
    ``RICHLAZY_MODELS``."""
    _entry_point_models()
    for name in os.environ.get("RICHLAZY_MODELS", "").split(","):
        if name.strip():
            try:
                importlib.import_module(name.strip())
            except BadInput as exc:  # a model that breaks the contract (register)
                raise BadInput(f"RICHLAZY_MODELS {name.strip()}: {exc}") from None
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                first = (str(exc).strip().splitlines() or [""])[0]
                raise BadInput(
                    f"RICHLAZY_MODELS: cannot import {name.strip()!r} "
                    f"({type(exc).__name__}: {first or 'no message'})"
                ) from None


ENTRY_POINTS = "richlazy.models"
"""The entry-point group of installed packages' models (``pyproject.toml``:
``[project.entry-points."richlazy.models"] my-model = "mypkg.models:MyModel"``)."""


def _entry_point_models() -> None:
    """Load the models that installed packages declare as entry points (:data:`ENTRY_POINTS`).

    An entry point names a module (whose ``@register`` classes register on import) or a
    :class:`Model` class, registered here if it is not yet. A failing one is one line of
    BadInput naming the entry point and its package.
    """
    from importlib import metadata

    for point in metadata.entry_points(group=ENTRY_POINTS):
        where = f"entry point {point.name} = {point.value!r}"
        if point.dist is not None:
            where += f" of {point.dist.name}"
        try:
            loaded = point.load()
        except BadInput as exc:
            raise BadInput(f"{where}: {exc}") from None
        except Exception as exc:  # the user's package: one line, not a traceback
            first = (str(exc).strip().splitlines() or [""])[0]
            raise BadInput(f"{where}: cannot load ({type(exc).__name__}: {first})") from None
        if isinstance(loaded, type) and issubclass(loaded, Model) and loaded is not Model:
            if _REGISTRY.get(loaded.name) is not loaded:
                register(loaded)


def all_models() -> dict[str, type[Model]]:
    """Every registered model, by name (modules in ``richlazy_cli.models`` are discovered)."""
    _discover()
    return dict(sorted(_REGISTRY.items()))


def get_model(name: str) -> type[Model]:
    """The model registered as ``name``; BadInput with a suggestion when there is none."""
    if name not in _REGISTRY:  # the package's family of that name: one module, not all
        _import_builtin(name)
    if name not in _REGISTRY:  # a researcher's model: their modules, still not every family
        _researchers_models()
    if name in _REGISTRY:
        return _REGISTRY[name]
    models = all_models()
    if name not in models:
        raise BadInput(
            f"unknown model {name!r}"
            + suggest(name, list(models))
            + f"; known models: {', '.join(models)}"
        )
    return models[name]
