"""The assertions about the attention explorer's page, as a learner sees it in Chromium:
`check_page` (the table with the CLI's numbers, heads, rows, temperatures, append, bad
prompts), `check_steps` (the steps' tables, a derivation, hover and lock, what-if
switches, what each layer would predict), `check_network` (no host but the server's),
`check_hangul_drawn` (Hangul drawn as Hangul, not boxes) and `check_file` (the --html
file from disk). Each returns one line per check passed and raises AssertionError at
the first that fails. Called by tests/viz/test_attention_page_browser.py on a tiny
model and by bench/attention_page_browser.py on a trained one.
"""

import math
from pathlib import Path

import torch

from tests.viz.browser import Page, hangul_fonts
from viz.attention_server import AttentionExplorer
from viz.attention_table import format_attention_table
from viz.attention_weights import select_head

# Python's own rounding, which the CLI's table uses; the page must print the same.
ROUNDING_PROBES = [0.0, 1.0, 0.125, 0.375, 0.625, 0.875, 0.005, 0.015, 0.994999, 0.995, 1 / 3]


def cli_numbers(explorer: AttentionExplorer, prompt: str, layer: int, head: int | None):
    """The numbers of the CLI's table (2 decimals), row by row, the row sum last."""
    result = explorer.explain(prompt)
    weights = torch.tensor(result["weights"])
    table = format_attention_table(select_head(weights, layer, head), prompt)
    # Each row: index, character label (␣ for a space: one word), weights..., sum.
    return [row.split()[2:] for row in table.splitlines()[2:]]


def check_page(page: Page, url: str, explorer: AttentionExplorer, prompt: str) -> list[str]:
    """Run the checks on the served page; returns one line per check passed.

    Raises:
        AssertionError: at the first check that fails, saying what was seen.
    """
    done = []
    info = explorer.model_info()
    last_layer, n_head = info["n_layer"] - 1, info["n_head"]
    page.open(url)
    assert page.driver.title == "Attention explorer", page.driver.title
    assert info["name"] in page.find("#model").text
    done.append(f"page loads: {page.find('#model').text}")

    page.show(prompt)
    T = len(prompt)
    rows = page.table_rows()
    expected = cli_numbers(explorer, prompt, last_layer, None)
    assert len(rows) == T and all(len(r) == i + 2 for i, r in enumerate(rows)), rows
    assert rows == expected, (rows, expected)
    labels = page.driver.execute_script(
        "return [...document.querySelectorAll('#attention-table thead th.char')]"
        ".map(th => th.textContent)"
    )
    assert labels == [c if c != " " else "␣" for c in prompt], labels
    done.append(f"typed {prompt!r}: {T} rows, the CLI's numbers (layer {last_layer}, average)")
    done.append(check_hangul_drawn(page, "#attention-table thead th.char"))

    page.click('#heads button[data-value="1"]')
    head_rows = page.table_rows()
    assert head_rows == cli_numbers(explorer, prompt, last_layer, 1), head_rows
    assert head_rows != rows and "head 1" in page.find("#table-title").text
    done.append("clicking head 1 changes the table to the CLI's head 1 table")

    page.click('#layers button[data-value="0"]')
    assert page.table_rows() == cli_numbers(explorer, prompt, 0, 1)
    picked = min(3, T - 1)
    page.click(f'#attention-table tbody tr[data-row="{picked}"]')
    side = page.heads_view()
    result = explorer.explain(prompt)
    for h in range(n_head):
        want = [f"{w:.2f}" for w in result["weights"][0][h][picked][: picked + 1]]
        assert side[h] == want, (h, side[h], want)
    assert len(side) == n_head + 1  # and the average
    done.append(f"clicking row {picked} shows it in all {n_head} heads of layer 0 side by side")

    logits = torch.tensor(result["logits"], dtype=torch.float64)
    for temperature in (0.5, 1.0, 1.5):
        page.set_temperature(temperature)
        shown = page.next_chars()
        probs = torch.softmax(logits / temperature, dim=-1)
        top = probs.topk(len(shown))
        assert [label for label, _ in shown] == [info["vocab_labels"][i] for i in top.indices]
        exact = [p for _, p in shown]
        assert all(math.isclose(p, q, abs_tol=1e-9) for p, q in zip(exact, top.values, strict=True))
    page.set_temperature(0)
    shown = page.next_chars()
    assert shown[0] == (info["vocab_labels"][int(logits.argmax())], 1.0)
    # Greedy: still ranked by the logits (not in vocabulary order after the first).
    ranked = torch.sort(logits, descending=True, stable=True).indices[: len(shown)]
    assert [label for label, _ in shown] == [info["vocab_labels"][i] for i in ranked]
    assert {p for _, p in shown[1:]} == {0.0}
    assert "greedy" in page.find("#temperature-help").text
    done.append("next-character probabilities = softmax(logits / T) for T = 0.5, 1, 1.5; 0 greedy")

    assert page.format_fixed(ROUNDING_PROBES, 2) == [f"{x:.2f}" for x in ROUNDING_PROBES]
    done.append("2-decimal rounding matches Python's (ties such as 0.125 to even)")

    page.set_temperature(1)
    first = page.next_chars()[0][0]
    page.click("#next-table tbody tr:first-child button")
    page.wait_for(lambda d: len(page.table_rows()) == min(T + 1, info["block_size"]), "append")
    grown = page.find("#prompt").get_attribute("value")
    assert grown == prompt + info["vocab"][info["vocab_labels"].index(first)], grown
    done.append(f"append {first!r}: the prompt and table grow by one character")

    page.show("<b>x</b>")
    message = page.message()
    assert "not in the model's vocabulary" in message and "'<' (U+003C)" in message, message
    assert not page.find_all("#message b") and page.find("#message p.error")
    assert not page.find("#explorer").is_displayed(), "the previous prompt's table is still shown"
    page.show("")
    assert page.message() == "the prompt is empty: type at least one character"
    page.show(prompt)
    assert page.find("#explorer").is_displayed() and len(page.table_rows()) == T
    done.append("bad prompts give the server's message, shown as text, and hide the old table")
    return done


def shown(value: float | None, decimals: int = 2) -> str:
    """A step's value as the page and the CLI print it (-inf, sent as None, is −∞)."""
    return "−∞" if value is None else f"{value:.{decimals}f}"


def exact(title: str) -> float:
    """A cell's exact value from its hover title ('−∞ ...' is -inf)."""
    word = title.split()[0]
    return -math.inf if word == "−∞" else float(word)


def check_steps(page: Page, url: str, explorer: AttentionExplorer, prompt: str) -> list[str]:
    """Check the step-by-step view on the served page, for layer 0 and head 1 of a
    prompt of at most 16 characters (tables of numbers, not heatmaps). Returns one line
    per check passed.

    Raises:
        AssertionError: at the first check that fails, saying what was seen.
    """
    done = []
    info = explorer.model_info()
    T = len(prompt)
    assert T <= 16, "check_steps reads the tables as numbers: a prompt of at most 16 characters"
    page.open(url)
    presets = {p["text"]: p for p in info["presets"]}
    if prompt in presets:  # a chapter's sentence: picked with its button
        button = page.find(f'#presets button[data-preset="{prompt}"]')
        before = page.message_and_rows()
        button.click()
        page.wait_for(lambda d: page.message_and_rows() != before, "the preset's tables")
        lacking = [p for p in info["presets"] if p["missing"]]
        for p in lacking:
            other = page.find(f'#presets button[data-preset="{p["text"]}"]')
            assert not other.is_enabled() and "".join(p["missing"][:1]) in other.get_attribute(
                "title"
            ), (p, other.get_attribute("title"))
        done.append(
            f"preset {prompt!r} shows its tables; the sentences with characters the model "
            f"lacks ({len(lacking)}) are offered disabled, naming them"
        )
    else:
        page.show(prompt)
    assert page.find("#prompt").get_attribute("value") == prompt

    layer, head = 0, 1
    page.click(f'#layers button[data-value="{layer}"]')
    page.find(f'#heads button[data-value="{head}"]').click()
    page.steps_ready(layer, head)
    own = explorer.steps(prompt, layer, head)
    order = page.driver.execute_script(
        "return [...document.querySelectorAll('#steps .step')].map(s => s.dataset.step)"
    )
    assert order == own["order"], order
    chapters = page.driver.execute_script(
        "return [...document.querySelectorAll('#steps h3')].map(h => h.textContent)"
    )
    assert [c.split(" · ")[0] for c in chapters] == [f"Step {n}" for n in range(1, 10)], chapters
    steps = {**own["layer_steps"], **own["heads"][str(head)]}
    compared, hovered = [], []
    for key, step in steps.items():
        rows, cols = step["shape"]
        if cols > 16:  # a heatmap: its values are in the tooltips
            for i, j in ((0, 0), (rows - 1, cols - 1), (rows // 2, cols // 2)):
                tip = page.heatmap_event(key, i, j)
                value = step["values"][i][j]
                assert exact(tip.rsplit(": ", 1)[1]) == (-math.inf if value is None else value)
            hovered.append(key)
            continue
        cells = page.step_cells(key)
        texts = [[text for text, _ in row] for row in cells]
        assert texts == [[shown(v) for v in row] for row in step["values"]], key
        titles = [[exact(title) for _, title in row] for row in cells]
        want = [[-math.inf if v is None else v for v in row] for row in step["values"]]
        assert titles == want, key
        compared.append(key)
    assert {"scores", "scaled", "masked", "weights"} <= set(compared)
    assert len(compared) + len(hovered) == len(order)
    masked = page.step_cells("masked")
    assert masked[0][1][0] == "−∞" and page.step_cells("weights")[0][1][0] == "0.00"
    done.append(
        f"the 9 steps in order, {len(order)} tables; {len(compared)} tables of numbers equal "
        f"the explorer's (−∞ before the softmax, 0.00 after); {len(hovered)} heatmaps give "
        "its values on hover"
    )
    done.append(check_hangul_drawn(page, "#steps table[data-step='weights'] tbody th.char"))

    # A weight's derivation, kept by a click.
    i, j = min(5, T - 1), min(2, T - 1)
    cell = f"#steps table[data-step='weights'] td[data-i='{i}'][data-j='{j}']"
    page.find(cell).click()
    page.wait_for(lambda d: page.derivation_cell() == ("cell", str(i), str(j)), "the derivation")
    found = page.derivation()
    table = {key: page.step_cells(key)[i][j] for key in ("scores", "scaled", "weights")}
    assert found["model-score"][1] == exact(table["scores"][1])
    assert found["model-scaled"][1] == exact(table["scaled"][1])
    assert found["model-weight"][1] == exact(table["weights"][1])
    assert math.isclose(found["sum"][1], found["model-score"][1], rel_tol=1e-5, abs_tol=1e-5)
    assert math.isclose(found["scaled"][1], found["model-scaled"][1], rel_tol=1e-5, abs_tol=1e-6)
    assert math.isclose(found["weight"][1], found["model-weight"][1], abs_tol=1e-6)
    assert found["model-weight"][0].endswith(f"{found['model-weight'][1]:.4f}")
    products = page.driver.execute_script(
        "return document.querySelectorAll('#derivation [data-role=product]').length"
    )
    assert products == info["d_k"]
    done.append(
        f"clicking weights[{i}][{j}] shows q·k over {products} channels, ÷√d_k, the row's "
        "softmax: each result equals the tables' number"
    )

    # Hover previews only while nothing is kept; Unlock lets the mouse lead again.
    page.hover("#steps table[data-step='scores'] td[data-i='1'][data-j='0']")
    assert page.derivation_cell() == ("cell", str(i), str(j)), "a hover moved a kept derivation"
    page.find("#unlock").click()
    page.wait_for(lambda d: not page.find_all("#unlock"), "Unlock to release the derivation")
    page.hover("#steps table[data-step='scores'] td[data-i='1'][data-j='0']")
    page.wait_for(lambda d: page.derivation_cell() == ("cell", "1", "0"), "the hover preview")
    assert not page.find_all("#unlock")
    future = f"#steps table[data-step='masked'] td[data-i='0'][data-j='{T - 1}']"
    page.find(future).click()
    page.wait_for(lambda d: page.derivation_cell() == ("cell", "0", str(T - 1)), "a future cell")
    assert "−∞" in page.find("#derivation [data-role=mask]").text
    assert page.derivation()["model-weight"][1] == 0.0 == page.derivation()["weight"][1]
    done.append("hover previews, a click keeps, Unlock releases; a future cell shows −∞, weight 0")
    # X·Xᵀ is the chapter's form, not a step of the model: its numbers are not the model's.
    page.find(f"#steps table[data-step='xx_weights'] td[data-i='{T - 1}'][data-j='0']").click()
    page.wait_for(lambda d: page.derivation_cell() == ("xx", str(T - 1), "0"), "X·Xᵀ's cell")
    for text, _ in page.derivation().values():
        assert "the model's" not in text, f"an X·Xᵀ number called the model's: {text!r}"
    assert "X·Xᵀ" in page.derivation()["model-weight"][0]

    # A row of weights·V: the weighted values and their sum.
    row = T - 1
    if steps["out"]["shape"][1] > 16:
        page.heatmap_event("out", row, 0, "click")
    else:
        page.find(f"#steps table[data-step='out'] td[data-i='{row}'][data-j='0']").click()
    page.wait_for(lambda d: page.derivation_cell()[:2] == ("row", str(row)), "the row's sum")
    sums = page.driver.execute_script(
        "return [...document.querySelectorAll('#derivation [data-role=out-sum]')]"
        ".map(td => [Number(td.dataset.exact), Number(td.nextElementSibling.dataset.exact)])"
    )
    out_row = steps["out"]["values"][row]
    assert [model for _, model in sums] == out_row
    assert all(math.isclose(a, b, abs_tol=1e-5) for a, b in sums), sums
    done.append(f"clicking row {row} of weights·V sums weights[{row}][j]·v_j to the model's row")
    page.find("#unlock").click()

    # A what-if switch: marked, changes the next characters, and off restores them.
    before = page.next_chars()
    lens_rows = lens_cells(page, T - 1)
    assert [label for label, _ in lens_rows[-1]] == [label for label, _ in before[:5]]
    assert all(
        math.isclose(p, q, abs_tol=1e-9)
        for (_, p), (_, q) in zip(lens_rows[-1], before[:5], strict=True)
    )
    assert len(lens_rows) == info["n_layer"]
    done.append(
        f"what each layer would predict: {len(lens_rows)} layers; after the last block, the "
        "next-character table's 5 likeliest"
    )
    page.find('#switches input[data-switch="uniform"]').click()
    page.steps_ready(layer, head, "uniform")
    assert page.find("#whatif-banner").is_displayed()
    assert "not what the model computes" in page.find("#whatif-banner").text
    assert "what-if" in page.find("#next-title").text
    switched = page.next_chars()
    assert switched != before, "the switch left the next characters as they were"
    answer = explorer.explain(prompt, 1.0, explorer.what_if(layer, head, ["uniform"]))
    served = [(n["label"], n["probability"]) for n in answer["next"]]
    assert [label for label, _ in served] == [label for label, _ in switched]
    assert all(
        math.isclose(p, q, abs_tol=1e-9) for (_, p), (_, q) in zip(served, switched, strict=True)
    ), "the next characters are not the what-if pass's"
    own_column = page.driver.execute_script(
        "return [...document.querySelectorAll('#next-table tbody td.own')].map(td => td.title)"
    )
    own_probs = {label: p for label, p in before}
    for (label, _), p in zip(switched, own_column, strict=True):
        if label in own_probs:
            assert math.isclose(float(p), own_probs[label], abs_tol=1e-9), (label, p)
    weights = page.step_cells("weights")
    assert [text for text, _ in weights[3][:4]] == ["0.25"] * 4
    # Under a switch the tables are the what-if's: the derivation must not call them the
    # model's.
    page.find("#steps table[data-step='weights'] td[data-i='3'][data-j='1']").click()
    page.wait_for(lambda d: page.derivation_cell() == ("cell", "3", "1"), "the derivation")
    for text, _ in page.derivation().values():
        assert "the model's" not in text, f"a what-if number called the model's: {text!r}"
    assert "what-if" in page.derivation()["model-weight"][0]
    if steps["out"]["shape"][1] > 16:
        page.heatmap_event("out", 3, 0, "click")
    else:
        page.find("#steps table[data-step='out'] td[data-i='3'][data-j='0']").click()
    page.wait_for(lambda d: page.derivation_cell()[:2] == ("row", "3"), "the row's sum")
    header = page.find("#derivation [data-role=weighted-sum] thead th:nth-child(3)").text
    assert header == "the what-if's out_3", header
    last_block = page.find(f"#lens table[data-position='{T - 1}'] tbody tr:last-child th").text
    assert last_block.endswith("the what-if's prediction"), last_block
    page.find("#unlock").click()
    assert page.find("#whatif-changes").is_displayed()
    page.find('#switches input[data-switch="uniform"]').click()
    page.steps_ready(layer, head, "")
    assert not page.find("#whatif-banner").is_displayed()
    assert page.next_chars() == before
    done.append(
        "'uniform weights' on layer 0, head 1: marked what-if, weights 1/(i+1), the next "
        "characters change; off: the model's own again, exactly"
    )
    page.find('#switches input[data-switch="no_mask"]').click()
    page.steps_ready(layer, head, "no_mask")
    row0 = [exact(title) for _, title in page.step_cells("weights")[0]]
    assert sum(row0[1:]) > 0.01, row0
    page.find('#switches input[data-switch="no_mask"]').click()
    page.steps_ready(layer, head, "")
    done.append("'no causal mask': row 0 attends to the characters after it")
    return done


def lens_cells(page: Page, position: int) -> list[list[tuple[str, float]]]:
    """What each layer would predict at ``position``: (label, probability) by layer."""
    rows = page.driver.execute_script(
        "return [...document.querySelectorAll("
        "  `#lens table[data-position='${arguments[0]}'] tbody tr`)].map("
        "  tr => [...tr.querySelectorAll('td')].map("
        "    td => [td.querySelector('.char').textContent, td.title]))",
        position,
    )
    return [[(label, float(p)) for label, p in row] for row in rows]


def check_network(page: Page, origin: str | None) -> str:
    """Every request the page made went to ``origin`` (e.g. http://127.0.0.1:8000), or
    none was made at all when ``origin`` is None (a file): read from the page's own
    resource timing and from DevTools' network log. Returns the check's line.

    Raises:
        AssertionError: naming each request made elsewhere.
    """
    import json

    timed = page.driver.execute_script(
        "return performance.getEntries().filter(e => e.name.includes(':')).map(e => e.name)"
    )
    logged = []
    for entry in page.driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            logged.append(message["params"]["request"]["url"])
    allowed = ("file:",) if origin is None else (origin.rstrip("/") + "/", "file:")
    elsewhere = sorted({u for u in timed + logged if not u.startswith(allowed)})
    assert not elsewhere, f"the page asked other hosts: {elsewhere}"
    # A request the page's Content-Security-Policy stopped was still an attempt.
    refused = [
        e["message"]
        for e in page.driver.get_log("browser")
        if "Content Security Policy" in e["message"] or "Refused to" in e["message"]
    ]
    assert not refused, f"the page tried to reach elsewhere: {refused}"
    if origin is None:
        assert not [u for u in logged if not u.startswith("file:")]
    asked = len(set(timed + logged))
    if origin is None:
        return f"{asked} addresses asked, all files on disk: no host at all"
    return f"{asked} addresses asked, all on {origin}: nothing else"


def is_hangul(text: str) -> bool:
    """True if ``text`` holds a Hangul syllable (U+AC00..U+D7A3) or jamo."""
    return any("\uac00" <= c <= "\ud7a3" or "\u1100" <= c <= "\u11ff" for c in text)


def check_hangul_drawn(page: Page, css: str) -> str:
    """The Hangul among the elements matching ``css`` is drawn as Hangul, not as boxes:
    with a font that fontconfig says covers Korean, and as wide as a syllable (about
    1 em; a missing glyph's box is about half that). Returns the check's line.

    Raises:
        AssertionError: naming the character, the fonts it was drawn with and its width.
    """
    covering = set(hangul_fonts())
    drawn = [d for d in page.drawn_text(css) if is_hangul(d[0])]
    assert drawn, f"no Hangul in {css}"
    for text, families, width, size in drawn:
        fonts = ", ".join(sorted(covering)) or "none installed (apt-get install fonts-nanum)"
        assert families and set(families) <= covering, (
            f"{text!r} was drawn with {families}, not with a font covering Korean "
            f"({fonts}): the learner sees boxes"
        )
        assert width >= 0.8 * size * len(text), (
            f"{text!r} is {width:.1f} px wide at {size:.0f} px: boxes, not Hangul"
        )
    used = sorted({f for _, families, _, _ in drawn for f in families})
    return f"{len(drawn)} Hangul labels drawn with {', '.join(used)}, each about 1 em wide"


def check_file(page: Page, html: Path, prompt: str) -> list[str]:
    """The --html file opened from disk: the table and the steps of every head are
    there, a derivation works, appending and the switches are off and say why, and
    nothing is asked of any host."""
    page.driver.get_log("performance")  # forget the requests of earlier pages
    page.driver.get(html.resolve().as_uri())
    page.wait_for(lambda d: page.table_rows(), "the file's table")
    assert len(page.table_rows()) == len(prompt)
    assert not page.find("#show").is_enabled()
    assert not page.find("#next-table tbody button").is_enabled()
    assert "--serve" in page.find("#continue-help").text
    done = [f"the --html file opened from disk shows {len(prompt)} rows; append needs --serve"]
    page.steps_ready(page.driver.execute_script("return state.layer"), 0)
    page.find('#heads button[data-value="1"]').click()
    page.steps_ready(page.driver.execute_script("return state.layer"), 1)
    page.find("#steps table[data-step='weights'] td[data-i='1'][data-j='0']").click()
    page.wait_for(lambda d: page.derivation_cell() == ("cell", "1", "0"), "the derivation")
    found = page.derivation()
    assert math.isclose(found["weight"][1], found["model-weight"][1], abs_tol=1e-6)
    switches = page.find_all("#switches input")
    assert switches and not any(s.is_enabled() for s in switches)
    assert "--serve" in page.find("#switches-note").text
    done.append("its steps: every head's from the file, a derivation; the switches need --serve")
    done.append(check_network(page, None))
    return done
