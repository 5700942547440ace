"""The page's views over training and across two models, in headless Chromium
(viz/page/training.js, viz/page/compare.js): the slider shows a snapshot's own tables
and next-character table, the changes view the difference of two snapshots' weights,
the compare view both models' next-character tables and a character one model lacks;
their captions in English and Korean. Skips where selenium or Chromium is not
installed, as tests/viz/test_attention_page_browser.py."""

import threading

import pytest
import torch

from data.tokenizer import CharTokenizer
from model import GPT, GPTConfig
from model.checkpoint import load_checkpoint, model_from_checkpoint
from tests.viz.conftest import (
    BROWSER_TEST,
    PROMPT,
    SNAPSHOT_VOCAB,
    VOCAB,
    sharp_model,
    write_snapshot_run,
)
from viz.attention_server import AttentionExplorer, ExplorerServer
from viz.attention_weights import attention_and_next_logits
from viz.model_compare import ComparedModel
from viz.snapshot_explorers import SnapshotExplorers
from viz.snapshots import SNAPSHOTS_DIR

pytestmark = BROWSER_TEST
SNAPSHOT_PROMPT = "abcab ha"


def start(server: ExplorerServer) -> ExplorerServer:
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server


def forward(model: GPT, vocab, prompt: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(n_layer, n_head, T, T) weights and the (vocab_size,) softmax of the next logits."""
    ids = torch.tensor([vocab.index(c) for c in prompt])
    weights, logits = attention_and_next_logits(model, ids)
    return weights, torch.softmax(logits.double(), dim=-1)


def shown(driver, css: str) -> list[list[str]]:
    """The title (the exact value) of each cell of a table's body rows, row by row."""
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0] + ' tbody tr')].map("
        "  tr => [...tr.querySelectorAll('td')].filter(td => !td.classList.contains('future'))"
        "  .map(td => td.title))",
        css,
    )


def next_probabilities(driver) -> list[float]:
    titles = driver.execute_script(
        "return [...document.querySelectorAll('#next-table td.probability')].map(td => td.title)"
    )
    return [float(x) for x in titles]


def test_the_slider_shows_a_snapshots_own_numbers_and_their_changes(page, tmp_path):
    write_snapshot_run(tmp_path)
    snapshots = {}
    for step in (5, 50):
        path = tmp_path / SNAPSHOTS_DIR / f"step_{step:07d}.pt"
        snapshots[step] = model_from_checkpoint(load_checkpoint(path))[0]
    torch.manual_seed(99)  # the finished model: neither snapshot
    finished = GPT(snapshots[5].config).eval()
    tokenizer = CharTokenizer(SNAPSHOT_VOCAB)
    explorer = AttentionExplorer(finished, tokenizer, "finished")
    server = start(
        ExplorerServer(
            ("127.0.0.1", 0),
            explorer,
            snapshots=SnapshotExplorers(tmp_path, torch.device("cpu")),
        )
    )
    driver = page.driver
    try:
        page.open(server.url + "?lang=en")
        page.show(SNAPSHOT_PROMPT)
        page.wait_for(
            lambda d: not page.find("#training-section").get_attribute("hidden"), "slider"
        )
        finished_value = page.find("#training-value").text
        page.click("#heads button[data-value='0']")  # layer 1 (the last), head 0
        finished_rows = shown(driver, "#attention-table")

        def move_to(position: int, step: int) -> None:
            driver.execute_script(
                "const s = document.getElementById('training-step');"
                "s.value = arguments[0]; s.dispatchEvent(new Event('input'));",
                str(position),
            )
            page.wait_for(
                lambda d: (
                    f"at step {step}" in page.find("#table-title").text
                    and f"at step {step}" in page.find("#next-title").text
                    and not page.find_all("#message p")
                ),
                f"the tables at step {step}",
            )

        move_to(0, 5)
        at_5 = shown(driver, "#attention-table"), next_probabilities(driver)
        value_5 = page.find("#training-value").text
        sample_5 = page.find("#training-sample").text
        first_note = page.find("#snapshot-changes p").text  # nothing before the first
        move_to(1, 50)
        page.wait_for(lambda d: page.find_all("#changes-table"), "the changes")
        at_50 = shown(driver, "#attention-table"), next_probabilities(driver)
        changes = shown(driver, "#changes-table")
        help_en = page.find("#changes-help").text
        page.find("#languages button[data-lang='ko']").click()
        page.wait_for(lambda d: "스텝" in page.find("#training-value").text, "the Korean words")
        value_ko = page.find("#training-value").text
        help_ko = page.find("#changes-help").text
        title_ko = page.find("#training-section h2").text
    finally:
        server.shutdown()
        server.server_close()
    assert finished_value == "the finished model (the run's checkpoint)"
    assert value_5 == "step 5 · validation loss 3.950 nats/char"
    assert "sample 5" in sample_5
    assert first_note == "The first snapshot has none before it: pick one to compare with."
    weights = {}
    for step, (rows, probs) in ((5, at_5), (50, at_50)):
        w, p = forward(snapshots[step], SNAPSHOT_VOCAB, SNAPSHOT_PROMPT)
        weights[step] = w[-1, 0]
        # A cell's title: "a → b: <the exact weight>"; the last cell is the row's sum.
        assert [[float(x.rpartition(": ")[2]) for x in row[:-1]] for row in rows] == [
            w[-1, 0, i, : i + 1].tolist() for i in range(len(SNAPSHOT_PROMPT))
        ]
        assert probs == pytest.approx(torch.sort(p, descending=True).values[:10].tolist())
    assert at_5[0] != at_50[0] != finished_rows
    # The changes view: step 50's weights minus step 5's, both their own passes.
    difference = weights[50].double() - weights[5].double()
    assert [[float(x) for x in row] for row in changes] == [
        difference[i, : i + 1].tolist() for i in range(len(SNAPSHOT_PROMPT))
    ]
    assert help_en.startswith("The weights at step 50 minus those at step 5")
    assert value_ko == "50 스텝 · 검증 손실 3.500 nats/글자 (그때까지 가장 낮음)"
    assert help_ko.startswith("50 스텝의 가중치 − 5 스텝의 가중치") and title_ko.startswith(
        "학습 중의"
    )


def test_the_finished_model_of_its_last_snapshots_step_is_compared_with_the_one_before(
    page, tmp_path
):
    """A finished run's checkpoint is its last snapshot (step 50) but for float16
    rounding: at the slider's end, the changes start from step 5, not from step 50."""
    write_snapshot_run(tmp_path)
    snapshots = {}
    for step in (5, 50):
        path = tmp_path / SNAPSHOTS_DIR / f"step_{step:07d}.pt"
        snapshots[step] = model_from_checkpoint(load_checkpoint(path))[0]
    explorer = AttentionExplorer(snapshots[50], CharTokenizer(SNAPSHOT_VOCAB), "finished", step=50)
    server = start(
        ExplorerServer(
            ("127.0.0.1", 0), explorer, snapshots=SnapshotExplorers(tmp_path, torch.device("cpu"))
        )
    )
    try:
        page.open(server.url + "?lang=en")
        page.show(SNAPSHOT_PROMPT)
        page.click("#heads button[data-value='0']")  # layer 1 (the last), head 0
        page.wait_for(lambda d: page.find_all("#changes-table"), "the changes")
        changes = shown(page.driver, "#changes-table")
        help_en = page.find("#changes-help").text
        note = page.find("#changes-finished").text
    finally:
        server.shutdown()
        server.server_close()
    assert help_en.startswith("The weights at the finished model minus those at step 5")
    assert note.startswith("The finished model's weights are those of its last snapshot, step 50")
    difference = forward(snapshots[50], SNAPSHOT_VOCAB, SNAPSHOT_PROMPT)[0][-1, 0].double()
    difference -= forward(snapshots[5], SNAPSHOT_VOCAB, SNAPSHOT_PROMPT)[0][-1, 0].double()
    assert [[float(x) for x in row] for row in changes] == [
        difference[i, : i + 1].tolist() for i in range(len(SNAPSHOT_PROMPT))
    ]


def other_model() -> GPT:
    """B: the sharp model's shape, other weights, a vocabulary without "T"."""
    torch.manual_seed(7)
    vocab = [c for c in VOCAB if c != "T"]
    config = GPTConfig(vocab_size=len(vocab), block_size=16, n_layer=2, n_head=3, n_embd=24)
    model = GPT(config)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.qkv_proj.weight.normal_(0.0, 1.0)
    return model.eval(), vocab


def test_the_compare_view_shows_both_models(page, tmp_path):
    a = sharp_model()
    b, b_vocab = other_model()
    explorer = AttentionExplorer(a, CharTokenizer(VOCAB), "new")
    compare = ComparedModel("parent", b, CharTokenizer(b_vocab))
    server = start(ExplorerServer(("127.0.0.1", 0), explorer, compare=compare))
    driver = page.driver
    tables = "document.querySelectorAll('.compare-next')"
    try:
        page.open(server.url + "?lang=en")
        page.show(PROMPT)
        page.wait_for(lambda d: len(page.find_all(".compare-next")) == 2, "both models' tables")
        shown_tables = driver.execute_script(
            f"return [...{tables}].map(t => [t.dataset.model, [...t.querySelectorAll("
            "'tbody tr')].map(tr => [tr.dataset.char, tr.querySelector('.probability').title,"
            " tr.classList.contains('changed')])])"
        )
        diff_cells = shown(driver, "#compare-weights-diff")
        # One click to the head whose weights moved most.
        heads = driver.execute_script("return comparison.answer.heads")
        button = page.find("#compare-most-changed")
        offered = (int(button.get_attribute("data-layer")), int(button.get_attribute("data-head")))
        button.click()
        picked = driver.execute_script("return [state.layer, state.head]")
        page.show("To be")
        page.wait_for(lambda d: page.find_all(".compare-missing"), "the missing character")
        missing_en = page.find(".compare-missing").text
        missing_model = page.find(".compare-missing").get_attribute("data-model")
        alone = driver.execute_script(
            "return [...document.querySelectorAll('.compare-alone')].map(t => [t.dataset.model,"
            " [...t.querySelectorAll('tbody tr')].map(tr => [tr.dataset.char,"
            " tr.querySelector('.probability').title])])"
        )
        alone_layers = len(page.find_all(".compare-alone-layers tbody tr"))
        page.find("#languages button[data-lang='ko']").click()
        page.wait_for(lambda d: "없습니다" in page.find(".compare-missing").text, "Korean")
        missing_ko = page.find(".compare-missing").text
        title_ko = page.find("#compare-section h2").text
    finally:
        server.shutdown()
        server.server_close()
    (name_a, rows_a), (name_b, rows_b) = shown_tables
    assert (name_a, name_b) == ("A", "B")
    wa, pa = forward(a, VOCAB, PROMPT)
    wb, pb = forward(b, b_vocab, PROMPT)
    for rows, probs, vocab in ((rows_a, pa, VOCAB), (rows_b, pb, b_vocab)):
        top = torch.sort(probs, descending=True, stable=True)
        assert [c for c, _, _ in rows] == [vocab[i] for i in top.indices[:10]]
        assert [float(p) for _, p, _ in rows] == pytest.approx(top.values[:10].tolist(), abs=1e-6)
    for char, p, changed in rows_a:  # marked: moved by 0.05 or more
        other = pb[b_vocab.index(char)].item() if char in b_vocab else 0.0
        assert changed == (abs(float(p) - other) >= 0.05)
    assert any(changed for _, _, changed in rows_a)
    flat = [(x, layer, h) for layer, row in enumerate(heads) for h, x in enumerate(row)]
    assert offered == max(flat)[1:] and picked == list(offered)
    # The picked head (last layer, head 0): A − B of the two models' own weights.
    difference = wa[-1, 0].double() - wb[-1, 0].double()
    assert [len(row) for row in diff_cells] == list(range(1, len(PROMPT) + 1))
    assert [float(x) for row in diff_cells for x in row] == pytest.approx(
        [x for i in range(len(PROMPT)) for x in difference[i, : i + 1].tolist()], abs=1e-6
    )
    assert missing_model == "B" and missing_en.startswith("B (parent) lacks 1 character(s)")
    assert "of the prompt, 'T': it cannot" in missing_en
    # A reads "To be": its own next characters, alone, as its forward pass gives them.
    ((name, rows),) = alone
    _, p_alone = forward(a, VOCAB, "To be")
    top = torch.sort(p_alone, descending=True, stable=True)
    assert name == "A" and [c for c, _ in rows] == [VOCAB[i] for i in top.indices[:10]]
    assert [float(p) for _, p in rows] == pytest.approx(top.values[:10].tolist(), abs=1e-6)
    assert alone_layers == a.config.n_layer
    assert missing_ko.startswith("B (parent)에 없는 프롬프트의 글자 1개: 'T'.")
    assert title_ko == "두 모델 나란히 보기"
