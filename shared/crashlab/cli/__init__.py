"""The ``crashlab`` command: one parser (:mod:`.main`), the argument checks in one place (:mod:`.args`), and the
class tools -- build, execute, release, classroom -- in their own module (:mod:`.classroom`)."""

from crashlab.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
