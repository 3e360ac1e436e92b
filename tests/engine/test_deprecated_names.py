"""Every older parameter name a model still accepts (a family's older record names,
:attr:`Model.aliases`; the parameters that chose the implementation before ``implementation``,
:attr:`Model.implementation_aliases`) is a :class:`RichlazyDeprecationWarning` naming the
spelling of now, and gives what the name of now gives; the command line says so in one line on
stderr, once (docs/usage.md, "Older parameter names")."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from richlazy_cli.engine.job import Job, Request, prepare_sweep
from richlazy_cli.errors import BadInput
from richlazy_cli.models.base import all_models
from richlazy_cli.numerics.compute import MissingRequirement
from richlazy_cli.params import RichlazyDeprecationWarning

MODELS = all_models()
RENAMED = [(name, alias, action, target) for name, cls in MODELS.items()
           for alias, targets in cls.aliases.items() for action, target in targets.items()]
"""Every (model, older name, action, parameter of now)."""
CHOSEN = [(name, alias, action, value, able[0])
          for name, cls in MODELS.items()
          for action, aliases in cls.implementation_aliases.items()
          for alias, mapping in aliases.items()
          for value, allowed in mapping.items()
          if (able := [i.name for i in cls.implementations
                       if i.name in allowed and action in i.actions])]
"""Every (model, older parameter, action, value, the implementation it chooses)."""


def _said(old: str, new: str) -> Any:
    return pytest.warns(RichlazyDeprecationWarning,
                        match=re.escape(f"parameter {old} is deprecated: write {new}"))


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for k in b:
        assert np.array_equal(np.asarray(a[k]), np.asarray(b[k])), k


def test_every_family_that_recorded_under_another_name_is_listed() -> None:
    assert {name for name, *_ in RENAMED} == {"cnn", "diagonal", "hermite", "linear", "rhm",
                                              "single-neuron", "two-layer"}
    assert {(name, alias) for name, alias, *_ in CHOSEN} == {
        ("hermite", "backend"), ("hermite", "loop"), ("two-layer", "backend")}


@pytest.mark.parametrize("name, alias, action, target", RENAMED)
def test_an_older_record_name_is_deprecated_and_is_its_parameter(
        name: str, alias: str, action: str, target: str) -> None:
    """Given, or swept, the older name warns naming the parameter of now, and is that
    parameter, which the result records under its own name; giving both is refused."""
    cls = MODELS[name]
    replaced = cls.overrides.get(target, ())  # giving them beside the target is refused
    example = {k: v for k, v in cls.examples[action][0].items()
               if k != target and k not in replaced}
    value: Any = [1] if cls.param(target).kind == "int_list" else 3
    try:
        with _said(alias, target):
            by_alias = cls.resolve(action, {**example, alias: value})
    except MissingRequirement:
        pytest.skip("needs the practice extra")
    by_name = cls.resolve(action, {**example, target: value})
    assert alias not in by_alias
    _same(by_alias, by_name)
    spec = "[[1], [2]]" if isinstance(value, list) else "3,4"
    with _said(alias, target):
        job = Job.build(name, action, example, [(alias, spec)])
    assert job.grid.names == (target,)
    with _said(alias, target), pytest.raises(BadInput, match=f"parameter {target} is given twice"):
        cls.resolve(action, {**example, alias: value, target: value})


@pytest.mark.parametrize("name, alias, action, value, impl", CHOSEN)
def test_an_older_implementation_parameter_is_deprecated(
        name: str, alias: str, action: str, value: str, impl: str) -> None:
    """``backend`` and ``loop`` warn naming the implementation their value chooses, and give
    what ``implementation`` = that gives."""
    cls = MODELS[name]
    example = cls.examples[action][0]
    try:
        with _said(alias, f"implementation = {impl}"):
            by_alias = cls.resolve(action, {**example, alias: value})
    except MissingRequirement:
        pytest.skip(f"implementation {impl} needs a missing extra")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RichlazyDeprecationWarning)
        by_name = cls.resolve(action, {**example, "implementation": impl})
    assert by_alias["implementation"] == impl and alias not in by_alias
    _same(by_alias, by_name)


@pytest.mark.parametrize("given, words", [
    ({"implementation": "torch", "backend": "numpy"}, "backend: numpy contradicts implementation"),
    ({"backend": "numpy", "loop": "numpy", "implementation": "numba"}, "contradicts"),
    ({"backend": "torch"}, "backend: torch (implementation torch) does not train"),
    ({"loop": "cuda"}, "loop: cuda is not one of numba, numpy"),
])
def test_older_implementation_parameters_that_contradict_are_refused(
        given: dict[str, str], words: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RichlazyDeprecationWarning)
        with pytest.raises(BadInput, match=re.escape(words)):
            MODELS["hermite"].resolve("train", {**MODELS["hermite"].examples["train"][0],
                                                **given})
        both = MODELS["hermite"].resolve("train", {"backend": "numpy", "loop": "numpy"})
    assert both["implementation"] == "numpy"


def test_the_names_of_now_say_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RichlazyDeprecationWarning)
        for name, cls in MODELS.items():
            for action in cls.actions:
                for example in cls.examples[action]:
                    try:
                        cls.resolve(action, example)
                    except MissingRequirement:
                        continue
                for p in cls.params:
                    assert cls.param(p.name, action).name == p.name, name


def test_an_override_by_an_older_name_replaces_the_job_files_value(tmp_path: Path) -> None:
    """``-p n_times=5`` over a job file that says ``n_records`` is the override, not the same
    parameter given twice; and the other way round."""
    for written, given in (("n_records", "n_times"), ("n_times", "n_records")):
        job_file = tmp_path / f"{written}.toml"
        job_file.write_text('model = "single-neuron"\naction = "solve"\n\n[params]\n'
                            f'method = "exact"\n{written} = 11\n\n[grid]\neta_a = "1,2"\n')
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RichlazyDeprecationWarning)
            job, _, _ = prepare_sweep(Request(params=[f"{given}=5"], config=job_file,
                                              run={"output": str(tmp_path / "out.h5")}))
        assert job.values(0)["n_records"] == 5


@pytest.mark.system
def test_the_command_line_says_it_once_in_one_line(tmp_path: Path, cli: Any) -> None:
    """An older name read twice over (the grid's dimension, then the parameter it sweeps) is
    one line on stderr; the run goes on. Each older name is its own line."""
    job_file = tmp_path / "old.toml"
    job_file.write_text('model = "single-neuron"\naction = "solve"\n\n[params]\n'
                        'method = "exact"\n\n[grid]\nn_times = "5,7"\n')
    result = cli("sweep", "-c", job_file, "-o", tmp_path / "out.h5", "-q", "--jobs", "1")
    assert result.code == 0, result.err
    line = "richlazy: warning: parameter n_times is deprecated: write n_records"
    assert result.err.splitlines() == [line]
    ran = cli("solve", "hermite", "-p", "backend=numpy", "-p", "checkpoints=5", "-p", "d=10",
              "-p", "P=3", "-p", "m=4", "-p", "t_max=3", "-o", tmp_path / "h.h5", "-q")
    assert ran.code == 0, ran.err
    assert sorted(ran.err.splitlines()) == [
        "richlazy: warning: parameter backend is deprecated: write implementation = numpy",
        "richlazy: warning: parameter checkpoints is deprecated: write n_records"]
    assert "Traceback" not in ran.err
