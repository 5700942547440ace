"""The attention explorer: its table and heatmaps hold the model's own attention weights,
and characters no font can draw fall back to code points instead of failing."""

import math
import warnings

import matplotlib
import numpy as np
import pytest
import torch
from matplotlib import font_manager

import explore_attention
from model import GPT, record_attention
from tests.viz.conftest import PROMPT, ids_of, parse_table, sharp_model
from viz.attention_plot import attention_grid_figure, update_attention_grid
from viz.attention_table import format_attention_table
from viz.attention_weights import prompt_attention, select_head
from viz.fonts import FontFile, MissingGlyphWarning, find_hangul_font, text_font
from viz.grid_layout import GridLayout, label_inches, panel_inches


def layer0_attention_by_hand(model: GPT, ids: torch.Tensor) -> torch.Tensor:
    """Layer 0's weights computed from the model's parameters, step by step."""
    T = ids.numel()
    with torch.no_grad():
        x = model.token_embedding(ids)[None] + model.position_embedding(torch.arange(T))
        block = model.blocks[0]
        q, k, v = block.attn.split_heads(block.attn.qkv_proj(block.ln_1(x)))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)[0]


def test_table_shows_the_models_own_weights(checkpoint, tmp_path, capsys):
    model, path = checkpoint
    T = len(PROMPT)
    args = ["--checkpoint", str(path), "--prompt", PROMPT, "--device", "cpu", "--decimals", "4"]
    png = tmp_path / "grid.png"
    assert explore_attention.main([*args, "--layer", "0", "--head", "1", "--png", str(png)]) == 0
    table = parse_table(capsys.readouterr().out, T)
    by_hand = layer0_attention_by_hand(model, ids_of(PROMPT))[1]
    with torch.no_grad(), record_attention(model) as own:
        model(ids_of(PROMPT)[None])
    for i, row in enumerate(table):
        *weights, total = row
        assert len(weights) == i + 1  # the future is blank, not printed
        assert total == pytest.approx(1.0, abs=1e-4)
        np.testing.assert_allclose(weights, by_hand[i, : i + 1], atol=6e-5)
        np.testing.assert_allclose(weights, own[0][0, 1, i, : i + 1], atol=6e-5)
    assert by_hand.max() > 0.9  # sharp attention: the check above can tell heads apart

    # The default is the last layer, averaged over its heads.
    assert explore_attention.main([*args, "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "layer 1 of 0..1, average of 3 heads" in out
    mean = own[1][0].mean(dim=0)
    for i, (*weights, total) in enumerate(parse_table(out, T)):
        np.testing.assert_allclose(weights, mean[i, : i + 1], atol=6e-5)
        assert total == pytest.approx(1.0, abs=1e-4)


def test_png_is_a_layers_by_heads_grid(checkpoint, tmp_path, capsys):
    _, path = checkpoint
    png = tmp_path / "grid.png"
    argv = ["--checkpoint", str(path), "--prompt", "To be", "--png", str(png), "--dpi", "50"]
    for n_rows, rows, extra in ((2, "2 layers", []), (1, "1 layer", ["--png-layers", "1"])):
        assert explore_attention.main([*argv, "--device", "cpu", *extra]) == 0
        assert f"wrote {png}: {rows} x 3 heads" in capsys.readouterr().out
        layout = GridLayout(panel_inches(5), n_rows, 3, label_inches(list("To␣be")), titled=True)
        height, width, _ = matplotlib.image.imread(png).shape
        # Agg rounds the pixel size down or to nearest depending on the fraction: +-1 px.
        assert abs(width - layout.width * 50) < 1 and abs(height - layout.height * 50) < 1
    assert explore_attention.main([*argv, "--png-layers", "2"]) == 2
    assert "--png-layers must be in 0..1" in capsys.readouterr().err


def test_grid_figure_panels_hold_the_weights_with_the_future_masked():
    model = sharp_model()
    text = "To be"
    weights = prompt_attention(model, ids_of(text))
    assert weights.shape == (2, 3, 5, 5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))
    fig = attention_grid_figure(weights, text)
    panels, colorbar = fig.axes[:-1], fig.axes[-1]
    assert len(panels) == 2 * 3 and colorbar.get_ylabel() == "attention weight"
    future = np.triu(np.ones((5, 5), dtype=bool), k=1)
    for n, ax in enumerate(panels):
        layer, head = divmod(n, 3)
        assert ax.get_title() == f"layer {layer} · head {head}"
        shown = ax.images[0].get_array()
        np.testing.assert_array_equal(shown.mask, future)
        np.testing.assert_allclose(shown.data[~future], weights[layer, head].numpy()[~future])
        assert [t.get_text() for t in ax.get_xticklabels()] == ["T", "o", "␣", "b", "e"]
        assert [t.get_text() for t in ax.get_yticklabels()] == ["T", "o", "␣", "b", "e"]


def test_new_weights_in_a_drawn_figure_draw_as_a_new_figure_would():
    """A run reuses each layer's figure (update_attention_grid): the pixels must be those
    of a figure built from scratch for the new weights."""
    from training.run_writer import figure_to_rgb

    text = "To be"
    first = prompt_attention(sharp_model(), ids_of(text))
    second = first.flip(1) ** 2  # other numbers in [0, 1], heads in another order
    reused = attention_grid_figure(first, text, heads_per_row=2)
    before = figure_to_rgb(reused)
    after = figure_to_rgb(update_attention_grid(reused, second))
    fresh = figure_to_rgb(attention_grid_figure(second, text, heads_per_row=2))
    np.testing.assert_array_equal(after, fresh)
    assert not np.array_equal(before, after)
    with pytest.raises(ValueError, match="do not fit this figure's 6 panels"):
        update_attention_grid(reused, second[:1])


def test_select_head_checks_its_range():
    weights = prompt_attention(sharp_model(), ids_of("To be"))
    torch.testing.assert_close(select_head(weights, -1), weights[1].mean(0))
    torch.testing.assert_close(select_head(weights, 0, 2), weights[0, 2])
    with pytest.raises(ValueError, match="layer must be in 0..1"):
        select_head(weights, 2)
    with pytest.raises(ValueError, match="head must be in 0..2"):
        select_head(weights, 0, 3)


def test_table_layout_blanks_the_future_and_sums_rows():
    w = torch.tensor([[1.0, 0.0, 0.0], [0.62, 0.38, 0.0], [0.1, 0.2, 0.7]])
    assert format_attention_table(w, "새가 ").splitlines() == [
        "         0     1     2",
        "        새    가     ␣   sum",
        "0 새  1.00              1.00",
        "1 가  0.62  0.38        1.00",
        "2 ␣   0.10  0.20  0.70  1.00",
    ]
    with pytest.raises(ValueError, match=r"\(2, 2\)"):
        format_attention_table(w, "ab")


def test_explorer_rejects_unknown_characters_and_long_prompts(checkpoint, capsys):
    _, path = checkpoint
    argv = ["--checkpoint", str(path), "--device", "cpu", "--prompt"]
    assert explore_attention.main([*argv, "새가 x"]) == 2
    assert "'x' (U+0078) at position 3" in capsys.readouterr().err
    assert explore_attention.main([*argv, "To be " * 3]) == 2
    assert "1 to 16 characters" in capsys.readouterr().err


def test_without_a_hangul_font_labels_fall_back_to_code_points(tmp_path):
    with pytest.warns(MissingGlyphWarning, match=r"새 \(U\+C0C8\).*fonts-nanum"):
        font = text_font("새가 a", fonts=[])  # a machine with no Hangul font
    assert font.hangul_font is None
    assert [font.label(c) for c in "새가 a"] == ["U+C0C8", "U+AC00", "␣", "a"]
    weights = prompt_attention(sharp_model(), ids_of("새가 "))
    fig = attention_grid_figure(weights, "새가 ", font=font, title="새가")
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["U+C0C8", "U+AC00", "␣"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.savefig(tmp_path / "fallback.png")
    assert not [w for w in caught if "missing from" in str(w.message)]  # no tofu boxes
    assert (tmp_path / "fallback.png").stat().st_size > 0


def test_placeholder_fonts_do_not_count_as_hangul():
    bundled = [
        FontFile(f.name, f.fname)
        for f in font_manager.fontManager.ttflist
        if f.name in ("DejaVu Sans", "Last Resort High-Efficiency")
    ]
    assert any(f.name == "DejaVu Sans" for f in bundled)
    assert find_hangul_font(bundled) is None  # Last Resort maps Hangul to boxes


@pytest.mark.skipif(find_hangul_font() is None, reason="no font with Hangul installed")
def test_an_installed_hangul_font_draws_the_characters():
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingGlyphWarning)
        font = text_font(PROMPT)
    assert font.families[-1] == font.hangul_font.name
    assert [font.label(c) for c in "새가 "] == ["새", "가", "␣"]
