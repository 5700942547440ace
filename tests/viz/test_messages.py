"""The attention page's one catalogue of words (viz/page/messages.json): every key in
Korean and English with the same placeholders and glossary links, every key the page's
scripts and template ask for present, the Korean in the seed chapters' terms, and the
Python side (`viz.messages.say`) rendering what the page renders."""

import re
import shutil
import subprocess

import pytest

from data.tokenizer import CharTokenizer
from tests.conftest import sharp_model
from tests.viz.conftest import VOCAB
from viz.attention_server import AttentionExplorer, PromptError
from viz.attention_steps import CHAPTER_STEPS, SWITCHES
from viz.messages import (
    CATALOGUE,
    LANGUAGES,
    LINK,
    PLACEHOLDER,
    Message,
    message_json,
    particle,
    say,
)
from viz.page_files import PAGE_TEMPLATE, SCRIPT_DIR, page_scripts

TEMPLATE = PAGE_TEMPLATE.read_text(encoding="utf-8")
SCRIPTS = page_scripts(TEMPLATE)
# A key in a script or the template: "prefix.rest" in quotes, the prefix a catalogue's.
PREFIXES = sorted({key.split(".")[0] for key in CATALOGUE})
KEY_IN_CODE = re.compile(r"""["'`](({})\.[a-z0-9_.]+)["'`]""".format("|".join(PREFIXES)))
GLOSSARY_TERMS = re.search(r"GLOSSARY_TERMS = \[([^\]]*)\]", SCRIPTS["glossary.js"]).group(1)
TERMS = re.findall(r'"([a-z_]+)"', GLOSSARY_TERMS)


@pytest.mark.parametrize("key", sorted(CATALOGUE))
def test_every_key_has_both_languages_with_the_same_placeholders_and_links(key):
    entry = CATALOGUE[key]
    assert sorted(entry) == sorted(LANGUAGES), f"{key}: languages {sorted(entry)}"
    en, ko = entry["en"], entry["ko"]
    assert en.strip() and ko.strip(), key
    assert sorted(PLACEHOLDER.findall(en)) == sorted(PLACEHOLDER.findall(ko)), key
    assert sorted(t for t, _ in LINK.findall(en)) == sorted(t for t, _ in LINK.findall(ko)), key
    for term, _ in LINK.findall(en):
        assert term == "section" or term in TERMS, f"{key} links to unknown term {term!r}"


def test_every_key_the_page_asks_for_is_in_the_catalogue():
    code = TEMPLATE + "".join(SCRIPTS.values())
    asked = {m.group(1) for m in KEY_IN_CODE.finditer(code)}
    # Keys built from a name: each switch, chapter, preset source and glossary term.
    asked |= {f"switch.{key}" for key in SWITCHES} | set(CHAPTER_STEPS.values())
    asked |= {f"presets.{source}" for source in ("chapter", "later", "run")}
    asked |= {f"glossary.{term}.{part}" for term in TERMS for part in ("name", "text")}
    asked = {key for key in asked if not key.endswith(".")}  # a prefix joined in code
    missing = sorted(asked - set(CATALOGUE))
    assert not missing, f"keys the page uses that the catalogue lacks: {missing}"
    assert len(asked) > 150  # the scan finds the page's keys, not nothing


def test_a_missing_key_fails_the_check(monkeypatch):
    """Planted: a key dropped from one language, and a key the page asks for removed."""
    broken = {**CATALOGUE["table.sum"]}
    del broken["ko"]
    monkeypatch.setitem(CATALOGUE, "table.sum", broken)
    with pytest.raises(AssertionError, match="languages"):
        test_every_key_has_both_languages_with_the_same_placeholders_and_links("table.sum")
    monkeypatch.delitem(CATALOGUE, "table.sum")
    with pytest.raises(AssertionError, match="table.sum"):
        test_every_key_the_page_asks_for_is_in_the_catalogue()


def test_the_korean_uses_the_chapters_terms():
    ko = {key: entry["ko"] for key, entry in CATALOGUE.items()}
    assert "인과 마스크" in ko["chapter.6"] and "가중합" in ko["chapter.8"]
    assert "어텐션 점수" in ko["chapter.4"] and "쿼리·키·밸류" in ko["chapter.3"]
    assert ko["step.q.title"].startswith("Q: 쿼리") and ko["step.v.title"].startswith("V: 밸류")
    assert "가중치" in ko["step.weights.title"] and "잔차 스트림" in ko["glossary.residual.name"]


def test_say_fills_placeholders_nested_messages_and_drops_links():
    title = Message("step.q.title", {"note": Message("qk.rope"), "d_k": 8})
    assert say(title, "en") == (
        "Q: the queries, then RoPE (each channel pair rotated by the character's position)"
    )
    assert say(title, "ko").startswith("Q: 쿼리, 그다음 RoPE")
    assert say("step.heading", "ko", chapter=6, name=Message("chapter.6")) == (
        "6단계 · 인과 마스크: softmax 전에 미래를 −∞로"
    )
    assert message_json(title) == {
        "key": "step.q.title",
        "args": {"note": {"key": "qk.rope", "args": {}}, "d_k": 8},
    }
    with pytest.raises(ValueError, match="unknown language 'fr': use one of en, ko"):
        say("table.sum", "fr")


def test_the_catalogue_file_sits_beside_the_scripts():
    assert (SCRIPT_DIR / "messages.json").is_file()


def test_the_servers_refusals_come_as_messages_in_both_languages():
    explorer = AttentionExplorer(_tiny_model(), CharTokenizer(VOCAB), "x")
    with pytest.raises(PromptError) as empty:
        explorer.prepare("")
    assert say(empty.value.message, "en") == str(empty.value)
    assert say(empty.value.message, "ko") == "프롬프트가 비어 있습니다: 글자를 하나 이상 입력하세요"
    with pytest.raises(PromptError) as unknown:
        explorer.prepare("새가 x<")
    assert unknown.value.message == Message(
        "error.unknown_chars", {"n": 2, "chars": "'x' (U+0078): 3, '<' (U+003C): 4"}
    )
    assert say(unknown.value.message, "ko").startswith("모델의 어휘에 없는 글자 2개")


# A particle written fixed after a placeholder ('{key}'는): right for half the characters.
FIXED_PARTICLE = re.compile(r"\{[a-z_]+\}['’\"”]?(?:이|가|은|는|을|를|과|와|으로|로)")


def fixed_particles(catalogue: dict) -> list[str]:
    return [
        f"{key}: {match.group()}"
        for key, entry in sorted(catalogue.items())
        for match in FIXED_PARTICLE.finditer(entry["ko"])
    ]


def test_no_fixed_particle_follows_a_placeholder():
    """Each particle after a placeholder is written "(은)는", "(이)가", ..., so that `say`
    and i18n.js choose it by the value's final consonant."""
    assert fixed_particles(CATALOGUE) == []
    planted = {"m": {"en": "'{key}' is", "ko": "'{key}'는 미래, {n}로"}}
    assert fixed_particles(planted) == ["m: {key}'는", "m: {n}로"]


@pytest.mark.parametrize(
    ("char", "expected"),
    [
        ("면", "'면'은 미래가 아니므로"),  # final ㄴ
        ("가", "'가'는 미래가 아니므로"),  # no final consonant
        ("a", "'a'(은)는 미래가 아니므로"),  # not Hangul: the neutral form
        (" ", "' '(은)는 미래가 아니므로"),
    ],
)
def test_say_picks_the_particle_by_the_characters_final_consonant(char, expected):
    assert expected in say("derivation.mask_past", "ko", j=0, i=1, key=char)
    assert say("derivation.mask_past", "en", j=0, i=1, key=char).startswith("j = 0 ≤ i = 1:")


def test_particle_forms():
    assert [particle(w, "이", "가") for w in ("말", "새", "7")] == ["이", "가", "(이)가"]
    assert [particle(w, "을", "를") for w in ("밥", "배")] == ["을", "를"]
    assert [particle(w, "과", "와") for w in ("밥", "배")] == ["과", "와"]
    assert [particle(w, "으", "로") for w in ("밥", "배", "말")] == ["으로", "로", "로"]
    # Past a closing parenthetical and quotes, to the word they follow.
    asides = ("'다'(위치 9)", "'밥'(위치 2)", "'다'", "7 (x)", "'", "()")
    neutral = ["(이)가"] * 3
    assert [particle(w, "이", "가") for w in asides] == ["가", "이", "가", *neutral]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run i18n.js")
def test_the_page_picks_the_same_particles_as_say():
    """i18n.js's rawText, run in node on the real catalogue, against `say`."""
    script = (SCRIPT_DIR / "i18n.js").read_text(encoding="utf-8")
    catalogue = (SCRIPT_DIR / "messages.json").read_text(encoding="utf-8")
    chars = ["면", "가", "말", "a", " ", "'다'(위치 9)", "'밥'(위치 2)"]
    program = f"""
const document = {{ getElementById: () => ({{ textContent: JSON.stringify(
  {{ lang: "ko", messages: {catalogue} }}) }}) }};
const window = {{ location: {{ search: "" }} }};
const navigator = {{ languages: ["ko"] }};
{script}
for (const key of {chars!r}) {{
  console.log(t("derivation.mask_past", {{ j: 0, i: 1, key }}));
  console.log(t("heads.title", {{ char: key, layer: 0 }}));
}}
"""
    shown = subprocess.run(
        ["node", "-e", program], capture_output=True, text=True, check=True, timeout=30
    ).stdout.split("\n")[:-1]
    expected = []
    for char in chars:
        expected.append(say("derivation.mask_past", "ko", j=0, i=1, key=char))
        expected.append(say("heads.title", "ko", char=char, layer=0))
    assert shown == expected
    assert "0층에서 말이 주목하는 글자" in shown
    assert "0층에서 '다'(위치 9)가 주목하는 글자" in shown


def test_the_korean_calls_a_layer_by_the_chapters_word():
    """The chapters' 층 for a layer of the model; 블록 only where the glossary says that
    the next chapter calls a 층 a Transformer 블록."""
    uses = sorted(key for key, entry in CATALOGUE.items() if "블록" in entry["ko"])
    assert uses == ["glossary.block.text"]
    assert CATALOGUE["glossary.block.name"]["ko"] == "층"
    assert say("block.title", "ko", layer=2).startswith("2층의 나머지")
    assert say("lens.after_block", "ko", layer=1) == "1층 뒤"


def test_nats_per_character_is_explained_in_the_glossary():
    assert "[[nats|" in CATALOGUE["training.help"]["ko"]
    assert "[[nats|" in CATALOGUE["training.help"]["en"]
    assert "bits = nats / ln 2" in CATALOGUE["glossary.nats.text"]["en"]
    assert "비트 = nats / ln 2" in CATALOGUE["glossary.nats.text"]["ko"]


def _tiny_model():
    return sharp_model(len(VOCAB), 16, n_layer=1, n_head=1, n_embd=8)
