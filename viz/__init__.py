"""Looking inside a run: attention weights for a prompt, as tables and heatmaps, every
step of self-attention with what-if switches and the logit lens (the explorer's page),
and loss curves read back from TensorBoard event files. Figures are drawn with matplotlib's
Agg renderer, so nothing here needs a display."""

import importlib

# Where each name lives. They are imported on first use (PEP 562), so that importing
# one module of viz (the attention weights, for sample-free inference) does not load
# matplotlib or TensorBoard.
_HOMES = {
    "MissingGlyphWarning": "viz.fonts",
    "WhatIf": "viz.attention_steps",
    "layer_predictions": "viz.logit_lens",
    "record_forward": "viz.attention_steps",
    "ScalarCurve": "viz.run_events",
    "TextFont": "viz.fonts",
    "attention_grid_figure": "viz.attention_plot",
    "find_hangul_font": "viz.fonts",
    "format_attention_table": "viz.attention_table",
    "loss_figure": "viz.loss_plot",
    "prompt_attention": "viz.attention_weights",
    "read_scalar_curves": "viz.run_events",
    "select_head": "viz.attention_weights",
    "text_font": "viz.fonts",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    """Import ``name`` from its module the first time it is asked for."""
    if name not in _HOMES:
        raise AttributeError(f"module 'viz' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
