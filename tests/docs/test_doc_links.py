"""Every relative link in README.md, README.ko.md, docs/ and dev/ leads somewhere: the file
(or picture) exists, and a ``#anchor`` names a heading of that file, as GitHub makes
heading anchors, or an ``<a id="...">`` in it. Links to web addresses are not followed.
"""

import re

import pytest

from tests.conftest import ROOT

DOCUMENTS = [ROOT / "README.md", ROOT / "README.ko.md", *sorted((ROOT / "docs").glob("*.md"))]
DOCUMENTS += sorted((ROOT / "dev").glob("*.md"))  # the development log
LINK = re.compile(r"\]\(([^)\s]+)\)")


def heading_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors a Markdown text defines (a repeated heading gets -1, -2, ...)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # no headings in code
    found, seen = set(), {}
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", text, flags=re.M):
        anchor = heading_anchor(heading)
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        found.add(anchor if count == 0 else f"{anchor}-{count}")
    return found | set(re.findall(r"<a id=\"([^\"]+)\"", text))


def links():
    """(document, link target) for every relative link of the documents."""
    found = []
    for doc in DOCUMENTS:
        text = re.sub(r"^```.*?^```", "", doc.read_text(encoding="utf-8"), flags=re.S | re.M)
        for target in LINK.findall(text):
            if not re.match(r"[a-z]+:", target):
                found.append((doc, target))
    return found


LINKS = links()


def test_anchors_are_made_as_github_makes_them():
    text = "# Compile cache\n## Optimizer step (batched Muon)\n## The GPU check's first run\n"
    text += '## 빠르게 시작하기\n## Recipes\n## Recipes\n<a id="extending-a-run"></a>\n'
    assert anchors(text) == {
        "compile-cache",
        "optimizer-step-batched-muon",
        "the-gpu-checks-first-run",
        "빠르게-시작하기",
        "recipes",
        "recipes-1",
        "extending-a-run",
    }


def test_the_documents_have_links_to_check():
    assert sum("#" in target for _, target in LINKS) >= 5


@pytest.mark.parametrize(("doc", "target"), LINKS, ids=[f"{d.name}: {t}" for d, t in LINKS])
def test_relative_link_leads_somewhere(doc, target):
    path, _, anchor = target.partition("#")
    file = (doc.parent / path).resolve() if path else doc
    assert file.exists(), f"{doc.name}: {target}: there is no {path}"
    if anchor:
        defined = anchors(file.read_text(encoding="utf-8"))
        assert anchor in defined, f"{doc.name}: {target}: {file.name} has no #{anchor}"
