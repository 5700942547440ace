"""The page's rest of the block in headless Chromium (viz/page/block.js): the page asks
for packed float32 tables and shows the same numbers; the block's steps, the pushes
beside the model's logit, and the per-word toggle with each row summing to 1. Skips
where selenium or Chromium is not installed, as tests/viz/test_attention_page_browser.py."""

import threading

import pytest

from data.tokenizer import CharTokenizer
from tests.viz.conftest import BROWSER_TEST, PROMPT, VOCAB, ids_of
from tests.viz.conftest import sharp_model as sharp_gpt2
from viz.attention_server import AttentionExplorer, ExplorerServer
from viz.attention_steps import record_forward
from viz.logit_attribution import logit_attribution
from viz.word_tables import word_spans, word_weights

pytestmark = BROWSER_TEST


def test_the_block_the_pushes_and_the_words_in_a_browser(page):
    model = sharp_gpt2()
    explorer = AttentionExplorer(model, CharTokenizer(VOCAB), "sharp")
    server = ExplorerServer(("127.0.0.1", 0), explorer)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    driver = page.driver
    try:
        page.open(server.url + "?lang=en")
        page.show(PROMPT)
        page.steps_ready(1, 0)
        page.wait_for(lambda d: page.find_all("#block .step"), "the block's steps")
        cards = [c.get_attribute("data-step") for c in page.find_all("#block .step")]
        pushes = driver.execute_script(
            "return [...document.querySelectorAll('#attribution tr')].map("
            "  tr => [tr.dataset.part || 'sum', tr.querySelector('td').title])"
        )
        # The main table, read from packed float32: the model's numbers, as before.
        weights = page.step_cells("weights")
        page.find("#words-toggle").click()
        page.wait_for(lambda d: page.find_all("#words table"), "the words")
        words = driver.execute_script(
            "return [...document.querySelectorAll(\"#words table[data-words='weights'] tr\")]"
            ".slice(1).map(tr => [...tr.querySelectorAll('td')].map(td => td.textContent))"
        )
        columns_note = [n.text for n in page.find_all("#words [data-role='columns-shown']")]
        # Zeroing the last layer's MLP: the page asks again; its write shows 0.
        page.find("#block-switches input[data-switch='zero_mlp']").click()
        page.wait_for(
            lambda d: (
                driver.execute_script(
                    "return state.result.what_if && state.result.what_if.switches.join()"
                )
                == "zero_mlp"
            ),
            "the zeroed MLP",
        )
        page.steps_ready(1, 0, "zero_mlp")
        page.wait_for(lambda d: page.find_all("#block .step[data-step='down']"), "the block")
        down = driver.execute_script("return state.steps.block.steps.down.values.flat()")
    finally:
        server.shutdown()
        server.server_close()
    assert cards == [
        *("block_in", "block_attention", "block_mid", "mlp_x"),
        *("up", "act", "down", "block_out"),
    ]
    record = record_forward(model, ids_of(PROMPT))
    expected = logit_attribution(model, record)
    assert len(pushes) == len(expected["parts"]) + 1
    for (name, shown), part in zip(pushes, expected["parts"], strict=False):
        assert (
            name
            == f"{part['kind']},{part['layer'] if part['layer'] is not None else 'null'},"
            + (str(part["head"]) if part["head"] is not None else "null")
        )
        assert float(shown) == pytest.approx(part["push"], abs=1e-12)
    assert float(pushes[-1][1]) == pytest.approx(expected["total"], abs=1e-12)
    own = record.layers[1]["weights"][0, 0]
    assert [float(title) for _, title in weights[4][:5]] == own[4, :5].tolist()  # j <= i
    per_word = word_weights(own, word_spans(PROMPT))
    assert [row[:-1] for row in words] == [[f"{v:.2f}" for v in row] for row in per_word.tolist()]
    assert [row[-1] for row in words] == ["1.00", "1.00", "1.00"]
    # weights·X per word: 16 of the model's channels, and the page says so.
    assert model.config.n_embd > 16
    assert columns_note == [f"channels 0 to 15 of {model.config.n_embd} shown"]
    assert len(down) == len(PROMPT) * model.config.n_embd and set(down) == {0}  # its write
