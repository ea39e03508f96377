"""The width of a printed line. A lesson's outputs, the harness's tables and the demo's summary fit
:data:`LINE_WIDTH` columns: what a JupyterLab output area shows at 1280 px with the file browser open, and a
100-column terminal with room to spare. A wider line wraps there, and a table's columns then fall apart."""

from __future__ import annotations

import textwrap

LINE_WIDTH = 95


def fit(text: str, width: int = LINE_WIDTH, indent: str = "  ") -> str:
    """``text`` with every line longer than ``width`` wrapped at words, its continuation lines indented by
    ``indent`` more than the line they continue. Lines that fit are left as they are: a table's spacing is its
    alignment."""
    out = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        more = " " * (len(line) - len(line.lstrip())) + indent
        out += textwrap.wrap(line, width, subsequent_indent=more, break_on_hyphens=False)
    return "\n".join(out)
