"""The attention page's one catalogue of words (viz/page/messages.json): every key in
Korean and English with the same placeholders and glossary links, every key the page's
scripts and template ask for present, the Korean in the seed chapters' terms, and the
Python side (`viz.messages.say`) rendering what the page renders."""

import re

import pytest

from viz.attention_steps import CHAPTER_STEPS, SWITCHES
from viz.messages import CATALOGUE, LANGUAGES, LINK, PLACEHOLDER, Message, message_json, say
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
