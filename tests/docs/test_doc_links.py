"""Every relative link in README.md, README.ko.md, docs/ and dev/ leads somewhere: the file
(or picture) exists, and a ``#anchor`` names a heading of that file, as GitHub makes
heading anchors, or an ``<a id="...">`` in it. Links to web addresses are not followed.
A Korean document (x.ko.md) links a page's Korean twin where docs/ has one.
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


KOREAN_DOCUMENTS = [doc for doc in DOCUMENTS if doc.name.endswith(".ko.md")]


def english_pages_without_their_korean_twin(doc, targets) -> list[str]:
    """The links of Korean ``doc`` to an English page x.md whose Korean twin x.ko.md exists
    but is linked neither instead nor beside it (doc's own English twin is fine)."""
    linked = {(doc.parent / t.partition("#")[0]).resolve() for t in targets}
    lonely = []
    for target in targets:
        path = target.partition("#")[0]
        if not path.endswith(".md") or path.endswith(".ko.md"):
            continue
        twin = (doc.parent / path).resolve().with_suffix(".ko.md")
        if twin.exists() and twin not in linked and twin != doc.resolve():
            lonely.append(target)
    return lonely


def test_a_korean_page_linking_only_the_english_twin_is_caught():
    doc = ROOT / "docs" / "attention_walkthrough.ko.md"
    assert english_pages_without_their_korean_twin(doc, ["sampling.md#flags"]) == [
        "sampling.md#flags"
    ]
    assert english_pages_without_their_korean_twin(doc, ["sampling.md", "sampling.ko.md"]) == []
    assert english_pages_without_their_korean_twin(doc, ["benchmarks.md", "../README.ko.md"]) == []


@pytest.mark.parametrize("doc", KOREAN_DOCUMENTS, ids=[d.name for d in KOREAN_DOCUMENTS])
def test_korean_documents_link_the_korean_pages(doc):
    """A Korean reader is led to docs/x.ko.md where it exists; the English x.md may stand
    beside it (the full table), never alone."""
    targets = [target for d, target in LINKS if d == doc]
    lonely = english_pages_without_their_korean_twin(doc, targets)
    assert not lonely, f"{doc.name}: link the Korean pages of {lonely}"
