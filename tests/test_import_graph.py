"""The package's import graph (docs/engine.md, "Ground floor"): no circle between modules, and
no arrow that runs back up the floors: practice/ never imports models/, models/ never imports
the engine, and the engine imports neither the report, the figures nor the CLI.

Every import counts, those inside functions too (a lazy import is still an arrow)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "richlazy_cli"


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


def graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p, modules) for p in paths}


def test_the_graph_is_read():
    g = graph()
    assert "richlazy_cli.models.base" in g["richlazy_cli.models.grokking"]
    assert "richlazy_cli.compute" in g["richlazy_cli.models.base"]
    assert "richlazy_cli.models._grokking_schedule" in g["richlazy_cli.models._grokking_stacked"]


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


def test_no_arrow_runs_back_up():
    rules = {"richlazy_cli.practice": ("richlazy_cli.models", "richlazy_cli.engine"),
             "richlazy_cli.models": ("richlazy_cli.engine", "richlazy_cli.report",
                                     "richlazy_cli.figures", "richlazy_cli.cli"),
             "richlazy_cli.engine": ("richlazy_cli.report", "richlazy_cli.figures",
                                     "richlazy_cli.cli", "richlazy_cli.store_cli")}
    back = [(m, t) for m, ts in graph().items() for floor, above in rules.items()
            if m.startswith(floor + ".") for t in ts
            if any(t == a or t.startswith(a + ".") for a in above)]
    assert back == []
