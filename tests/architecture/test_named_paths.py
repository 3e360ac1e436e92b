"""Every repository path that the README, docs/, jobs/ or a docstring names exists.

A path is a word that starts with one of the repository's top-level folders (``richlazy_cli/``,
``docs/``, ``jobs/``, ``tests/``, …) or that contains a ``/`` and ends in a source suffix
(``.py``, ``.md``, ``.toml``, …); a short one such as ``engine/store.py`` is looked up under the
package and the tests too. Patterns (``jobs/*.toml``, ``results/<name>.h5``) and generated
folders (``results/``, ``reports/``) are not paths of the repository.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOP = ("richlazy_cli", "richlazy", "tests", "docs", "jobs", "bench", "scripts", "examples")
SUFFIXES = (".py", ".md", ".toml", ".sh", ".sbatch", ".npz", ".txt", ".cfg")
WORD = re.compile(r"(?<![\w./~$-])((?:[\w.-]+/)+[\w.-]*)")
PLACEHOLDER = re.compile(r"[*<>{}…$%]|(?:^|/)[A-Z][A-Z_]*(?=[./]|$)")
GENERATED = ("results/", "reports/", ".venv/", "build/")


def candidates(text: str) -> set[str]:
    found = set()
    for match in WORD.finditer(text):
        end = match.end()
        if end < len(text) and text[end] in "*<{$%…":
            continue
        word = match.group(1).split("::")[0].rstrip(".,:;")
        if PLACEHOLDER.search(word) or word.startswith(GENERATED) or "//" in word:
            continue
        if word.split("/")[0] in TOP or word.endswith(SUFFIXES):
            found.add(word)
    return found


def exists(word: str) -> bool:
    return any((base / word).exists() for base in (ROOT, ROOT / "richlazy_cli", ROOT / "tests"))


def docstrings(path: Path) -> str:
    tree = ast.parse(path.read_text(), str(path))
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(
        n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))]
    return "\n".join(filter(None, (ast.get_docstring(n, clean=False) for n in nodes)))


@cache
def sources() -> dict[str, str]:
    """The texts to read, by file (read once: the parametrisation and the tests share them)."""
    texts = {"README.md": (ROOT / "README.md").read_text()}
    for path in sorted((ROOT / "docs").rglob("*.md")):
        texts[str(path.relative_to(ROOT))] = path.read_text()
    for path in sorted((ROOT / "jobs").rglob("*.toml")):
        texts[str(path.relative_to(ROOT))] = path.read_text()
    for top in ("richlazy_cli", "richlazy", "tests", "bench", "scripts"):
        for path in sorted((ROOT / top).rglob("*.py")):
            texts[str(path.relative_to(ROOT))] = docstrings(path)
    return texts


def test_the_reader_finds_paths() -> None:
    """The reader itself: it takes paths and leaves patterns and prose alone."""
    text = ("see `richlazy_cli/models/two_layer/model.py`, tests/cli/test_cli.py::test_x and "
            "engine/store.py; not jobs/*.toml, results/fig1b.h5, reports/<name>/ or and/or")
    assert candidates(text) == {"richlazy_cli/models/two_layer/model.py",
                                "tests/cli/test_cli.py", "engine/store.py"}
    assert not exists("richlazy_cli/models/two_layer.py")


@pytest.mark.parametrize("name", sorted(sources()))
def test_every_named_path_exists(name: str) -> None:
    missing = sorted(word for word in candidates(sources()[name]) if not exists(word))
    assert missing == [], f"{name} names paths that do not exist: {missing}"

