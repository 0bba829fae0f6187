"""Shared look of every figure: method names, colours and order, suite names, saving.

Every figure module takes its names and colours from here, so ``cBMM`` is the
same red and ``mirt`` the same blue in every panel of the paper.  Method
labels, colours and order are read from the method registry
(:func:`cbmm.registry.get_method`), so a method added with
:func:`cbmm.register_method` is drawn with its own label and colour.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # figures are files; never open a window

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from ..io import atomic_path  # noqa: E402
from ..registry import get_method  # noqa: E402
from ..tables import SUITE_LABELS, method_label, ordered_methods, suite_label  # noqa: E402

__all__ = [
    "SUITE_LABELS", "FIGURE_WIDTH_IN", "PNG_DPI",
    "method_label", "method_color", "suite_label", "ordered_methods", "paper_style",
    "method_legend_handles", "save_figure", "place_labels",
]


def method_color(method: str) -> str:
    """Colour of a registered method in every figure (``"cbmm"`` -> cBMM red)."""
    return get_method(method).color

#: Width of a full-width figure in the paper (inches).
FIGURE_WIDTH_IN = 7.0

#: Resolution of the PNG copies.
PNG_DPI = 300


@contextmanager
def paper_style():
    """Matplotlib settings shared by all figures (font sizes legible at 7 inches)."""
    with plt.rc_context({
        "font.size": 8,
        "axes.titlesize": 9,
        "axes.labelsize": 8.5,
        "xtick.labelsize": 7.5,
        "ytick.labelsize": 7.5,
        "legend.fontsize": 8,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.color": "#e3e3e3",
        "grid.linewidth": 0.6,
        "axes.axisbelow": True,
        "pdf.fonttype": 42,  # embed TrueType so the PDF text stays editable/searchable
        "savefig.bbox": "tight",
        "savefig.pad_inches": 0.03,
    }):
        yield


def method_legend_handles(methods) -> list[Patch]:
    """Legend entries (hollow boxes as in the boxplots) for ``methods``."""
    return [Patch(facecolor="white", edgecolor=method_color(m), linewidth=1.5,
                  label=method_label(m)) for m in methods]


#: The figure files :func:`save_figure` writes, by suffix.
FIGURE_FORMATS = (".pdf", ".png", ".svg")


def save_figure(fig, out_paths) -> list[Path]:
    """Save ``fig`` to every path in ``out_paths`` (format from the suffix), atomically.

    Each file is written to a temporary file in the target folder and renamed,
    so an interrupted run never leaves a truncated figure behind.  PNGs are
    written at :data:`PNG_DPI`; PDFs carry no creation date so that reruns give
    identical files.

    Returns
    -------
    list of Path
        The written paths.
    """
    if isinstance(out_paths, (str, os.PathLike)):
        out_paths = [out_paths]
    written = []
    for path in map(Path, out_paths):
        suffix = path.suffix.lower()
        if suffix not in FIGURE_FORMATS:
            raise ValueError(f"{path}: unsupported figure format {suffix!r} "
                             f"(use {', '.join(FIGURE_FORMATS[:-1])} or {FIGURE_FORMATS[-1]})")
        metadata = {"CreationDate": None} if suffix == ".pdf" else None
        with atomic_path(path, suffix=suffix) as tmp:
            fig.savefig(tmp, format=suffix[1:], dpi=PNG_DPI, metadata=metadata)
        written.append(path)
    return written


def place_labels(ax, xs, ys, texts, *, colors=None, fontsize=7.5,
                 candidates=((0, 6), (0, -7), (7, 0), (-7, 0), (6, 6), (-6, 6), (6, -7),
                             (-6, -7), (0, 15), (0, -16))):
    """Annotate points with text, choosing for each the first offset that overlaps nothing.

    A small greedy placement: offsets (points) are tried in order and the
    first whose text box stays inside the axes and intersects neither an
    earlier label nor another point is kept (else the first candidate).  Call
    it after the figure's layout is final.  Good enough for a handful of labels.

    Returns
    -------
    list of matplotlib.text.Annotation
    """
    from matplotlib.transforms import Bbox

    renderer = ax.figure.canvas.get_renderer()
    axes_box = ax.get_window_extent(renderer)
    centres = ax.transData.transform(np.column_stack([xs, ys]))
    radius = 4.0 * ax.figure.dpi / 72  # marker half-size in pixels
    points = [Bbox.from_extents(cx - radius, cy - radius, cx + radius, cy + radius)
              for cx, cy in centres]
    colors = colors if colors is not None else ["black"] * len(texts)
    placed, annotations = [], []
    for k, (x, y, text, color) in enumerate(zip(xs, ys, texts, colors)):
        obstacles = placed + [box for j, box in enumerate(points) if j != k]
        chosen = None
        for dx, dy in candidates:
            ann = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points",
                              ha="center" if dx == 0 else ("left" if dx > 0 else "right"),
                              va="center" if dy == 0 else ("bottom" if dy > 0 else "top"),
                              fontsize=fontsize, color=color)
            box = ann.get_window_extent(renderer)
            inside = (box.x0 >= axes_box.x0 and box.x1 <= axes_box.x1
                      and box.y0 >= axes_box.y0 and box.y1 <= axes_box.y1)
            if inside and not any(box.overlaps(other) for other in obstacles):
                chosen = ann
                break
            ann.remove()
        if chosen is None:
            chosen = ax.annotate(text, (x, y), xytext=candidates[0], textcoords="offset points",
                                 ha="center", va="bottom", fontsize=fontsize, color=color)
        annotations.append(chosen)
        placed.append(chosen.get_window_extent(renderer))
    return annotations
