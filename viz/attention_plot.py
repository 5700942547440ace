"""Heatmaps of attention weights: one row of panels per layer, one column per head (or,
with ``heads_per_row``, each layer's heads wrapped onto several rows).

Each panel is a T x T image of one head: row i (the current character, the query)
shows how much it attends to each column j (the character attended to, the key). The
colour scale is 0..1 in every panel, so heads can be compared by eye, and the masked
future (above the diagonal) is light grey rather than dark, to tell "not allowed"
apart from "allowed but ignored".

Figures are `matplotlib.figure.Figure` objects, not pyplot ones: no global state and
no display needed; ``fig.savefig("x.png")`` renders them with the Agg backend.
"""

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.figure import Figure

from viz.char_labels import code_point_label
from viz.fonts import TextFont, text_font
from viz.grid_layout import GridLayout, label_inches, panel_inches

COLOURMAP = "viridis"
MASKED_COLOUR = "#e6e6e6"  # the future: not a weight, so not on the colour scale
TICK_FONT_SIZE = 8


def attention_grid_figure(
    weights: torch.Tensor | np.ndarray,
    text: str,
    *,
    layers: Sequence[int] | None = None,
    font: TextFont | None = None,
    title: str | None = None,
    heads_per_row: int | None = None,
) -> Figure:
    """Draw a grid of attention heatmaps, layers down, heads across.

    Args:
        weights: (n_layer, n_head, T, T) attention weights, e.g. from
            `viz.attention_weights.prompt_attention`, or a slice of its layers.
        text: the prompt, T characters; drawn along both axes of every panel.
        layers: the layer number of each row, for the panel titles
            (default 0..n_layer-1; pass [l] when ``weights`` is layer l alone).
        font: how to draw the characters; default `viz.fonts.text_font(text)`, which
            warns (MissingGlyphWarning) about characters no installed font has.
        title: a line above the grid.
        heads_per_row: at most this many heads side by side, a layer's heads taking
            several rows (default: all of them, one row per layer). A TensorBoard card
            shows a whole image at its width, so a near-square grid shows it largest
            (see `square_heads_per_row`).

    Returns:
        A Figure whose first n_layer * n_head axes are the panels, row by row (layer
        0 head 0, layer 0 head 1, ...), each holding one image of its (T, T) weights
        with the future masked; then the unused places of a layer's last row, if
        any, turned off; the last axes is the colour bar.

    Raises:
        ValueError: if text is empty, weights is not 4-D with its two last dimensions
            equal to len(text), or layers does not have one entry per row.
    """
    w = np.asarray(weights.detach().cpu().float() if torch.is_tensor(weights) else weights)
    T = len(text)
    if T == 0 or w.ndim != 4 or w.shape[2:] != (T, T):
        raise ValueError(
            f"weights must be (n_layer, n_head, {T}, {T}) for a {T}-character text, got {w.shape}"
        )
    n_layer, n_head = w.shape[:2]
    layers = list(range(n_layer)) if layers is None else list(layers)
    if len(layers) != n_layer:
        raise ValueError(f"layers has {len(layers)} entries for {n_layer} rows of weights")
    font = font if font is not None else text_font(text)
    labels = [font.label(c) for c in text]
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    cmap = colormaps[COLOURMAP].with_extremes(bad=MASKED_COLOUR)

    columns = n_head if heads_per_row is None else max(1, min(heads_per_row, n_head))
    rows_per_layer = -(-n_head // columns)  # ceil
    side = panel_inches(T)
    layout = GridLayout(side, n_layer * rows_per_layer, columns, label_inches(labels), bool(title))
    fig = Figure(figsize=(layout.width, layout.height))
    axes = fig.subplots(
        n_layer * rows_per_layer, columns, squeeze=False, gridspec_kw=layout.gridspec()
    )
    tick_style = {"fontsize": TICK_FONT_SIZE, "fontfamily": list(font.families)}
    image = None
    for index, layer in enumerate(layers):
        for head in range(n_head):
            row, column = index * rows_per_layer + head // columns, head % columns
            ax = axes[row, column]
            shown = np.ma.masked_array(w[index, head], mask=future)
            image = ax.imshow(shown, cmap=cmap, vmin=0.0, vmax=1.0, interpolation="nearest")
            ax.set_title(f"layer {layer} · head {head}", fontsize=9)
            ax.set_xticks(range(T), labels, rotation=layout.x_label_rotation, **tick_style)
            ax.set_yticks(range(T), labels, **tick_style)
            ax.tick_params(length=0)
            if index == n_layer - 1 and head + columns >= n_head:  # no panel below
                ax.set_xlabel("attended character (key)", fontsize=8)
            if column == 0:
                ax.set_ylabel("current character (query)", fontsize=8)
        for unused in range(n_head, rows_per_layer * columns):  # a last row not full
            axes[index * rows_per_layer + unused // columns, unused % columns].set_axis_off()
    fig.colorbar(image, cax=fig.add_axes(layout.colorbar_rect()), label="attention weight")
    if title:
        # Characters no font has would be drawn as boxes, with a warning per glyph.
        drawable = "".join(c if font.can_draw(c) else code_point_label(c) for c in title)
        fig.suptitle(drawable, y=layout.title_y(), va="top", fontfamily=list(font.families))
    return fig


def update_attention_grid(fig: Figure, weights: torch.Tensor | np.ndarray) -> Figure:
    """Put new weights into a figure of `attention_grid_figure` drawn for the same text
    and shape, in place: a run draws its heatmaps for one prompt at every evaluation,
    and building the axes and their tick labels is most of a figure's drawing time.

    Args:
        fig: the figure `attention_grid_figure` returned.
        weights: (n_layer, n_head, T, T) attention weights of the figure's shape.

    Returns:
        ``fig``, each panel's image holding its head's new weights (future masked).

    Raises:
        ValueError: if ``weights`` does not have the figure's panels and T.
    """
    w = np.asarray(weights.detach().cpu().float() if torch.is_tensor(weights) else weights)
    panels = [ax.images[0] for ax in fig.axes if ax.images]
    shapes = {image.get_array().shape for image in panels}
    if w.ndim != 4 or w.shape[0] * w.shape[1] != len(panels) or shapes != {w.shape[2:]}:
        raise ValueError(
            f"weights of shape {w.shape} do not fit this figure's {len(panels)} panels"
        )
    future = np.triu(np.ones(w.shape[2:], dtype=bool), k=1)
    for image, head_weights in zip(panels, w.reshape(-1, *w.shape[2:]), strict=True):
        image.set_data(np.ma.masked_array(head_weights, mask=future))
    return fig


def square_heads_per_row(n_head: int) -> int:
    """Heads per row for a near-square grid of one layer (4 heads: 2 x 2; 6: 3 x 2; 8 and
    9: 3 x 3): the largest a fixed-size card (TensorBoard's) shows a whole image at."""
    return max(1, int(np.ceil(np.sqrt(n_head))))
