"""The attention page's files: the HTML template and its scripts in viz/page/.

The template ``viz/attention_page.html`` names its scripts in the order they run,
``<script src="page/core.js"></script>`` and so on. Served, the page asks for each
(`page_scripts` reads them once, at start, for viz/attention_server.py to answer
``GET /page/<name>.js``); written as one file (``explore_attention.py --html``),
`inline_scripts` puts each script's text inside its tag, and the page's
Content-Security-Policy then allows exactly those texts by their SHA-256.

    scripts = page_scripts(template)          # {"core.js": "...", ...}
    html = inline_scripts(template, scripts)  # one self-contained document
"""

import base64
import hashlib
import re
from pathlib import Path

PAGE_TEMPLATE = Path(__file__).with_name("attention_page.html")
SCRIPT_DIR = Path(__file__).with_name("page")
# One script tag of the template; a name is letters, digits and _ only, so a tag can
# never name a path outside viz/page/.
SCRIPT_TAG = re.compile(r'<script src="page/([a-z0-9_]+\.js)"></script>')
# The template's policy for a served page: scripts from the server itself only.
SERVED_SCRIPTS = "script-src 'self'"


def script_names(template: str) -> list[str]:
    """The scripts the template loads, in its order (e.g. ["core.js", ..., "main.js"])."""
    return SCRIPT_TAG.findall(template)


def page_scripts(template: str) -> dict[str, str]:
    """Each script the template names, read from viz/page/: {name: text}.

    Raises:
        OSError: if a script cannot be read, or the template names none.
    """
    names = script_names(template)
    if not names:
        raise OSError(f"{PAGE_TEMPLATE} names no script of {SCRIPT_DIR}")
    return {name: (SCRIPT_DIR / name).read_text(encoding="utf-8") for name in names}


def inline_scripts(template: str, scripts: dict[str, str]) -> str:
    """The template with each script tag holding its script's text, and a policy that
    allows exactly those texts (a 'sha256-...' source each): one file, opened from disk.

    Raises:
        ValueError: if a script's text holds "</script" (it would end its tag early).
    """
    for name, text in scripts.items():
        if "</script" in text.lower():
            raise ValueError(f"viz/page/{name} holds '</script': it cannot be inlined")
    # The hash covers exactly what lies between <script> and </script>.
    inline = {name: f"\n{text}" for name, text in scripts.items()}
    digests = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()}'"
        for text in inline.values()
    )
    # A function as replacement: a script's backslashes stay as they are.
    html = SCRIPT_TAG.sub(lambda m: f"<script>{inline[m.group(1)]}</script>", template)
    return html.replace(SERVED_SCRIPTS, f"script-src {digests}", 1)
