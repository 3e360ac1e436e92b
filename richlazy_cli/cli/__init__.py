"""The command line: ``app.py`` is the ``richlazy`` command (Typer) and its ``main``;
``store.py`` the ``richlazy store`` sub-commands; ``common.py`` what the commands share (option
types, the console, JSON output). A thin layer over the engine, the report and the figures
(docs/architecture.md).
"""
