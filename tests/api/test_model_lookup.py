"""Looking a model up by name imports what that name needs: a family's own module, or the
researcher's modules (``RICHLAZY_MODELS``, entry points), never every family (their imports,
SciPy's integrators and torch among them, are the start-up of each worker and each command).
A taken name stays refused however the lookup reached the researcher's module. Checked by the
module set of a fresh interpreter, not by timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ..conftest import ROOT, TEST_MODELS

pytestmark = pytest.mark.system

FAMILIES = ("cnn", "diagonal", "grokking", "hermite", "linear", "rhm", "single_neuron",
            "two_layer")


def _lookup(name: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``get_model(name)`` in a fresh interpreter; prints the families whose module it
    imported, or the one-line refusal."""
    code = (
        "import json, sys\n"
        "from richlazy_cli.errors import BadInput\n"
        "from richlazy_cli.models.base import get_model\n"
        "try:\n"
        f"    print(get_model({name!r}).__module__)\n"
        "except BadInput as exc:\n"
        "    print('refused:', exc)\n"
        f"families = {FAMILIES!r}\n"
        "print(json.dumps([f for f in families if f'richlazy_cli.models.{f}' in sys.modules]))\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def test_a_family_imports_its_own_module_only() -> None:
    proc = _lookup("single-neuron", {"RICHLAZY_MODELS": ""})
    module, families = proc.stdout.splitlines()
    assert module == "richlazy_cli.models.single_neuron.model"
    assert json.loads(families) == ["single_neuron"]


def test_a_researchers_model_imports_no_family() -> None:
    proc = _lookup("toy", {"RICHLAZY_MODELS": TEST_MODELS})
    module, families = proc.stdout.splitlines()
    assert module == TEST_MODELS
    assert json.loads(families) == []


def test_a_researchers_model_under_a_familys_name_is_refused(tmp_path) -> None:
    """The family of that name registers first, though the lookup did not ask for it."""
    (tmp_path / "clash_models.py").write_text(
        "from tests.engine_models import Toy\n"
        "from richlazy_cli.models.base import register\n"
        "register(type('Clash', (Toy,), {'name': 'linear'}))\n")
    proc = _lookup("toy", {"RICHLAZY_MODELS": "clash_models",
                           "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"})
    refusal = proc.stdout.splitlines()[0]
    assert refusal.startswith("refused: RICHLAZY_MODELS clash_models: model linear: the name "
                              "is taken by richlazy_cli.models.linear.model"), refusal
