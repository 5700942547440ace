"""Looking inside a run: attention weights for a prompt, as tables and heatmaps, and
loss curves read back from TensorBoard event files. Figures are drawn with matplotlib's
Agg renderer, so nothing here needs a display."""

from viz.attention_plot import attention_grid_figure
from viz.attention_table import format_attention_table
from viz.attention_weights import prompt_attention, select_head
from viz.fonts import MissingGlyphWarning, TextFont, find_hangul_font, text_font
from viz.loss_plot import loss_figure
from viz.run_events import ScalarCurve, read_scalar_curves

__all__ = [
    "MissingGlyphWarning",
    "ScalarCurve",
    "TextFont",
    "attention_grid_figure",
    "find_hangul_font",
    "format_attention_table",
    "loss_figure",
    "prompt_attention",
    "read_scalar_curves",
    "select_head",
    "text_font",
]
