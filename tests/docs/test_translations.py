"""A Korean page written as a full translation of its English page (docs/x.ko.md beside
docs/x.md) keeps its shape: the same sections, tables and pictures, and the same
commands (their shell comments, translated, left out). Other Korean pages are shorter
on purpose (docs/configuration.ko.md: the common keys only) and are not held to it."""

import re

import pytest

from tests.conftest import ROOT
from tests.docs.test_doc_commands import commands_in

TRANSLATIONS = ["docs/watching.ko.md", "docs/finetune.ko.md"]


def shape(text: str) -> dict[str, object]:
    """What a translation keeps of a Markdown page: its count of sections (## headings),
    of tables, its pictures and its commands without their comments."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return {
        "sections": len(re.findall(r"^##\s", prose, flags=re.M)),
        "tables": len(re.findall(r"^\|(?:-+\|)+\s*$", prose, flags=re.M)),
        "pictures": re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", prose),
        "commands": [re.sub(r"\s+#.*$", "", c) for c in commands_in(text)],
    }


def test_a_translation_that_lost_a_command_is_caught():
    english = "## Use\n\n| a | b |\n|---|---|\n\n```bash\npython sample.py  # the sample\n```\n"
    korean = "## 쓰는 법\n\n| 가 | 나 |\n|---|---|\n\n```bash\npython sample.py  # 샘플\n```\n"
    assert shape(english) == shape(korean)
    assert shape(english) != shape(korean.replace("python sample.py  # 샘플", ""))


@pytest.mark.parametrize("page", TRANSLATIONS)
def test_a_translation_has_the_shape_of_its_english_page(page):
    english = re.sub(r"\.ko\.md$", ".md", page)
    want = shape((ROOT / english).read_text(encoding="utf-8"))
    got = shape((ROOT / page).read_text(encoding="utf-8"))
    for part in want:
        assert got[part] == want[part], f"{page}: its {part} differ from {english}'s"
