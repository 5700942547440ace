"""Rewrite README.md's configuration table from the config fields.

    python docs/make_config_table.py      # from the repository root

Each key's type, range, default and doc sit beside its field (training/settings.py);
this writes the table `python train.py --help-config` prints between README.md's
config-reference markers, so adding a key means editing its field, then running this.
README.ko.md's shorter table of the common keys is written by hand (a test checks its
keys and defaults against the fields).
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from training.config import config_reference  # noqa: E402

BEGIN, END = "<!-- config-reference", "<!-- end config-reference -->"


def with_generated_table(readme: str) -> str:
    """``readme`` with the lines between its markers replaced by the generated table.

    Raises:
        ValueError: if either marker is missing.
    """
    if BEGIN not in readme or END not in readme:
        raise ValueError(f"README.md has no {BEGIN} ... {END} markers")
    begin = readme.index("\n", readme.index(BEGIN)) + 1
    end = readme.index(END)
    return readme[:begin] + config_reference() + "\n" + readme[end:]


def main() -> None:
    """Rewrite README.md's table in place if it differs, and say which happened."""
    path = ROOT / "README.md"
    old = path.read_text(encoding="utf-8")
    new = with_generated_table(old)
    if new == old:
        print("README.md's configuration table is up to date")
        return
    path.write_text(new, encoding="utf-8")
    print("README.md: configuration table rewritten from the config fields")


if __name__ == "__main__":
    main()
