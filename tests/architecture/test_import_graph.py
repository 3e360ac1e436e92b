"""The package's import graph (docs/architecture.md): no circle between modules, no arrow that
runs back up the floors (ground floor, ``numerics/``, ``practice/``, ``models/``, ``engine/``,
``report/``, ``figures/``, ``cli/``), no family that imports another, and a ``models/`` folder
that holds one folder per family beside the shared plumbing.

Every import counts, those inside functions too (a lazy import is still an arrow)."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "richlazy_cli"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The package's modules that ``path`` imports (relative imports resolved; ``from a import
    b`` counts ``a.b`` where that is a module, else ``a``)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                stem = ".".join([*base, node.module] if node.module else base)
            else:
                stem = node.module or ""
            targets = [f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in modules else stem
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


@cache
def graph() -> dict[str, set[str]]:
    """Every module of the package and the package's modules it imports (read once per run)."""
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p, modules) for p in paths}


def test_the_graph_is_read():
    g = graph()
    assert "richlazy_cli.models.base" in g["richlazy_cli.models.grokking.model"]
    assert "richlazy_cli.numerics.compute" in g["richlazy_cli.models.base"]
    assert "richlazy_cli.models.grokking._schedule" in g["richlazy_cli.models.grokking._stacked"]


def test_no_circles():
    """No module reaches itself through the modules it imports (a package importing its own
    submodules, ``__init__`` → child, is not an arrow back)."""
    g = {m: {t for t in ts if not m.startswith(t + ".") and not t.startswith(m + ".")}
         for m, ts in graph().items()}
    state: dict[str, int] = {}
    path: list[str] = []
    circles: list[list[str]] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(g.get(m, ())):
            if state.get(t) == 1:
                circles.append([*path[path.index(t):], t])
            elif t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m)
    assert circles == []


FLOORS = ("numerics", "practice", "models", "engine", "report", "figures", "cli")
"""The package's folders from the bottom up; the ground floor (``errors``, ``params``,
``userfiles``, ``mathtext``) lies below them all."""
GROUND = ("errors", "params", "userfiles", "mathtext")
PLUMBING = {"base"}
"""The module of ``models/`` that is not a family: the model base and the registry."""


def floor_of(module: str) -> int | None:
    """0 for the ground floor, 1… for :data:`FLOORS`; None for the package's face and
    ``__main__``."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] == "__main__":
        return None
    if parts[1] in GROUND:
        return 0
    return FLOORS.index(parts[1]) + 1


def family_of(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "models" and parts[2] not in PLUMBING:
        return parts[2]
    return None


def test_no_arrow_runs_back_up():
    """Every import points to the same floor or one below it."""
    back = [(m, t) for m, ts in graph().items() for t in ts
            if floor_of(m) is not None and floor_of(t) is not None
            and floor_of(t) > floor_of(m)]  # type: ignore[operator]
    assert back == []


def test_the_ground_floor_imports_only_the_ground_floor():
    g = graph()
    ground = [m for m in g if floor_of(m) == 0]
    assert set(ground) == {f"richlazy_cli.{name}" for name in GROUND}
    assert [(m, t) for m in ground for t in g[m] if floor_of(t) != 0] == []


def test_no_family_imports_another_and_the_engine_imports_none():
    """A family reaches the rest only through the shared plumbing; the engine finds the
    families through the registry (``models/base.py``), never by importing one."""
    crossed = [(m, t) for m, ts in graph().items() for t in ts
               if family_of(t) and family_of(m) not in (None, family_of(t))]
    assert crossed == []
    engine = [(m, t) for m, ts in graph().items() if m.startswith("richlazy_cli.engine.")
              for t in ts if family_of(t)]
    assert engine == []


def test_models_holds_one_folder_per_family():
    """Every module of ``models/`` is the plumbing or lives in a family's folder, and every
    family the package registers is defined in its folder's ``model.py``."""
    from richlazy_cli.models.base import all_models

    models = PACKAGE / "models"
    loose = sorted(p.stem for p in models.glob("*.py") if p.stem != "__init__")
    assert set(loose) == PLUMBING
    folders = {p.parent.name for p in models.glob("*/__init__.py")}
    own = {name: cls for name, cls in all_models().items()
           if cls.__module__.startswith("richlazy_cli.")}
    assert {cls.__module__ for cls in own.values()} == {
        f"richlazy_cli.models.{folder}.model" for folder in folders}
    assert len(own) == len(folders) == 8
