"""``python -m crashlab.bench``: the command line of :mod:`crashlab.cli.bench`, also how the benchmark
starts each engine's own child process (``[sys.executable, "-m", "crashlab.bench", ...]``)."""

from crashlab.cli.bench import main

if __name__ == "__main__":
    raise SystemExit(main())
