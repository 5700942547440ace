"""Rewrite docs/configuration.md's table of every key from the config fields.

    python docs/make_config_table.py      # from the repository root

Each key's type, range, default and doc sit beside its field (training/settings.py);
this writes the table `python train.py --help-config` prints between the
config-reference markers of docs/configuration.md, so adding a key means editing its
field, then running this. docs/configuration.ko.md's shorter table of the common keys is
written by hand (a test checks its keys and defaults against the fields).
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from training.config import config_reference  # noqa: E402

BEGIN, END = "<!-- config-reference", "<!-- end config-reference -->"
PAGE = ROOT / "docs" / "configuration.md"


def with_generated_table(page: str) -> str:
    """``page`` with the lines between its markers replaced by the generated table.

    Raises:
        ValueError: if either marker is missing.
    """
    if BEGIN not in page or END not in page:
        raise ValueError(f"{PAGE.name} has no {BEGIN} ... {END} markers")
    begin = page.index("\n", page.index(BEGIN)) + 1
    end = page.index(END)
    return page[:begin] + config_reference() + "\n" + page[end:]


def main() -> None:
    """Rewrite the page's table in place if it differs, and say which happened."""
    old = PAGE.read_text(encoding="utf-8")
    new = with_generated_table(old)
    if new == old:
        print("docs/configuration.md's table is up to date")
        return
    PAGE.write_text(new, encoding="utf-8")
    print("docs/configuration.md: table rewritten from the config fields")


if __name__ == "__main__":
    main()
