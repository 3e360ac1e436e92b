"""One version: ``richlazy --version``, the package's ``__version__``, CITATION.cff and the
newest section of CHANGELOG.md say the same; the changelog has its "Upgrading" section."""

from __future__ import annotations

import re

import richlazy_cli

from ..conftest import ROOT


def test_one_version_everywhere(cli) -> None:
    version = richlazy_cli.__version__
    assert cli("--version").out.strip() == f"richlazy {version}"
    citation = (ROOT / "CITATION.cff").read_text()
    assert f'version: "{version}"' in citation
    changelog = (ROOT / "CHANGELOG.md").read_text()
    sections = re.findall(r"^## (\d+\.\d+\.\d+) - \d{4}-\d{2}-\d{2}$", changelog, re.M)
    assert sections and sections[0] == version, sections
    newest = changelog.split(f"## {sections[0]}")[1].split("\n## ")[0]
    assert "### Upgrading from" in newest
