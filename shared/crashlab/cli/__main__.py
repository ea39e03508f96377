"""``python -m crashlab.cli``: the ``crashlab`` command."""

from crashlab.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
