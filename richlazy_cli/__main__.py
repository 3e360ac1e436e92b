"""``python -m richlazy_cli``: the same as the ``richlazy`` console script."""

from richlazy_cli.cli.app import main

if __name__ == "__main__":
    main()
