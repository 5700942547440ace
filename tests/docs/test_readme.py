"""The READMEs stay a ten-minute read: each at most about 260 lines (the configuration
table, the attention walkthrough, precision and export details live in docs/), both lead
to the configuration and walkthrough pages, and README.ko.md links the same docs pages
as README.md, each in Korean where docs/ has a Korean page (docs/x.ko.md)."""

import re

import pytest

from tests.conftest import ROOT

MOST_LINES = 260
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


@pytest.mark.parametrize("name", READMES)
def test_readme_reads_in_ten_minutes(name):
    text = (ROOT / name).read_text(encoding="utf-8")
    assert too_long(text) is None, f"{name}: {too_long(text)}"


def test_a_readme_past_the_limit_is_caught():
    assert too_long("line\n" * 300) == ("300 lines, past 260: move the detail to a page in docs/")
    assert too_long("line\n" * MOST_LINES) is None


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
