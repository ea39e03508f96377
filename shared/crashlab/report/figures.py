"""How a course figure leaves matplotlib: one PNG at a fixed dpi, stamped with the smallest font size it uses.

JupyterLab shows a PNG at its own pixel size and shrinks it to the output area when it is wider, so a figure
is legible at 100% only when it is at most :data:`WIDTH_PX` wide at :data:`DPI` and no text in it is under
:data:`MIN_PT`. Text height cannot be read back from pixels, so :func:`png` measures it on the figure itself (every
visible text artist) and writes it into the PNG as a text chunk, beside the dpi. A test reads the committed outputs
of every master and fails on a picture wider than the budget, on a stamp under 10 pt, and on a picture with no
stamp at all -- one that did not come through :func:`show_figure`.
"""

from __future__ import annotations

import base64
import io
import struct

DPI = 100           # the notebooks' figures are drawn at the pixel size they are shown at
WIDTH_PX = 980      # JupyterLab at 1,024 px: about 1,000 px of content, minus the output prompt's margin
MIN_PT = 10         # no text smaller than this in any figure
FONT_KEY = "crashlab:min-font-pt"
DPI_KEY = "crashlab:dpi"


def smallest_font(fig) -> float:
    """The smallest font size (pt) of any visible, non-empty text in ``fig``: titles, tick labels, legends,
    annotations."""
    from matplotlib.text import Text

    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return min(sizes) if sizes else float(MIN_PT)


def png(fig, dpi: int = DPI) -> bytes:
    """``fig`` as PNG bytes, cropped to what is drawn, with its smallest font size and its dpi in text chunks."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight",
                metadata={FONT_KEY: f"{smallest_font(fig):g}", DPI_KEY: str(dpi)})
    return buffer.getvalue()


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) in pixels, from the PNG's header."""
    return struct.unpack(">II", data[16:24])


def png_text(data: bytes) -> dict[str, str]:
    """The PNG's ``tEXt`` chunks, as a dict: where :func:`png` put its stamp."""
    chunks, at = {}, 8
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        if kind == b"tEXt":
            key, _, value = data[at + 8:at + 8 + length].partition(b"\0")
            chunks[key.decode("latin-1")] = value.decode("latin-1")
        if kind == b"IEND":
            break
        at += 12 + length
    return chunks


def _title(fig) -> str:
    texts = [fig.get_suptitle(), *(ax.get_title() for ax in fig.axes), *(t.get_text() for t in fig.texts)]
    return next((t.replace("\n", " ") for t in texts if t.strip()), "figure")


def show_figure(*figures) -> None:
    """Show each figure in the notebook as a stamped PNG (see :func:`png`), then close it -- in place of
    ``plt.show()``, which would show it unstamped. With no argument, every figure still open is shown."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    if not figures:
        figures = tuple(plt.figure(n) for n in plt.get_fignums())
    for fig in figures:
        data = png(fig)
        plt.close(fig)
        display({"image/png": base64.b64encode(data).decode(), "text/plain": f"<figure: {_title(fig)}>"}, raw=True)


__all__ = ["DPI", "DPI_KEY", "FONT_KEY", "MIN_PT", "WIDTH_PX", "png", "png_size", "png_text", "show_figure",
           "smallest_font"]
