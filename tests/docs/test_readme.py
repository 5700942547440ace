"""The READMEs stay a ten-minute read: each at most MOST_LINES lines, and README.md at
most MOST_WORDS words, counted as ``wc -w`` counts them: whitespace-separated tokens of
the whole file, code blocks and tables included (README.ko.md is bounded by lines only:
Korean words count differently). The configuration table, the attention walkthrough,
sample.py's flags, every error message, precision and export details live in docs/.
Both READMEs lead to the configuration and walkthrough pages, and README.ko.md links
the same docs pages as README.md, each in Korean where docs/ has a Korean page
(docs/x.ko.md)."""

import re

import pytest

from tests.conftest import ROOT

MOST_LINES = 215
MOST_WORDS = 2100  # 2,615 words took a new reader 11-13 minutes start to end
READMES = ["README.md", "README.ko.md"]
DOCS_LINK = re.compile(r"\]\((docs/[^)\s#]+)")


def docs_links(text: str) -> set[str]:
    """The docs/ files a Markdown text links to (pictures included), anchors dropped."""
    return set(DOCS_LINK.findall(text))


def korean(path: str) -> str:
    """docs/x.md's Korean page docs/x.ko.md where it exists, else the path itself."""
    ko = re.sub(r"(?<!\.ko)\.md$", ".ko.md", path)
    return ko if (ROOT / ko).is_file() else path


def english(path: str) -> str:
    """docs/x.ko.md's English page docs/x.md; any other path as it is."""
    return re.sub(r"\.ko\.md$", ".md", path)


def too_long(text: str) -> str | None:
    """A message when a README has more than MOST_LINES lines, else None."""
    lines = text.count("\n")
    if lines > MOST_LINES:
        return f"{lines} lines, past {MOST_LINES}: move the detail to a page in docs/"
    return None


def too_wordy(text: str) -> str | None:
    """A message when a text has more than MOST_WORDS words (as ``wc -w``), else None."""
    words = len(text.split())
    if words > MOST_WORDS:
        return f"{words} words, past {MOST_WORDS}: move the detail to a page in docs/"
    return None


@pytest.mark.parametrize("name", READMES)
def test_readme_reads_in_ten_minutes(name):
    text = (ROOT / name).read_text(encoding="utf-8")
    assert too_long(text) is None, f"{name}: {too_long(text)}"


def test_the_english_readme_reads_in_ten_minutes_by_its_words():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert too_wordy(text) is None, f"README.md: {too_wordy(text)}"


def test_a_readme_past_the_limit_is_caught():
    assert too_long("line\n" * 300) == ("300 lines, past 215: move the detail to a page in docs/")
    assert too_long("line\n" * MOST_LINES) is None
    # words split on any whitespace, a code block's and a table's included
    assert too_wordy("a b\n```\nc\n```\n| d |\n" * 300) == (
        "2400 words, past 2100: move the detail to a page in docs/"
    )
    assert too_wordy("word " * MOST_WORDS) is None


def test_the_readmes_lead_to_the_configuration_table_and_the_walkthrough():
    english_links = docs_links((ROOT / "README.md").read_text(encoding="utf-8"))
    korean_links = docs_links((ROOT / "README.ko.md").read_text(encoding="utf-8"))
    for page in ("docs/configuration.md", "docs/attention_walkthrough.md"):
        assert page in english_links, f"README.md does not link {page}"
        assert korean(page) in korean_links, f"README.ko.md does not link {korean(page)}"
    # the Korean table of common keys, and the walkthrough, exist in Korean
    assert korean("docs/configuration.md") == "docs/configuration.ko.md"
    assert korean("docs/attention_walkthrough.md") == "docs/attention_walkthrough.ko.md"


def test_the_korean_readme_links_the_same_docs_pages():
    english_links = docs_links((ROOT / "README.md").read_text(encoding="utf-8"))
    korean_links = docs_links((ROOT / "README.ko.md").read_text(encoding="utf-8"))
    missing = {korean(page) for page in english_links} - korean_links
    assert not missing, f"README.ko.md lacks the links of README.md: {sorted(missing)}"
    extra = {english(page) for page in korean_links} - english_links
    assert not extra, f"README.ko.md links pages README.md does not: {sorted(extra)}"
    # an English page only beside its Korean one (the full table beside the short one)
    english_only = {p for p in korean_links if korean(p) != p and korean(p) not in korean_links}
    assert not english_only, f"README.ko.md: link the Korean pages of {sorted(english_only)}"
