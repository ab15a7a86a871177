"""``python -m xdem``: the command-line interface."""

from xdem.cli import main

if __name__ == "__main__":  # pragma: no cover
    main()
