r"""How text typed on a command line or in a config is read: backslash escapes, the
same for every flag and key that takes text.

    sample.py          --prompt, --stop
    explore_attention.py  --prompt
    config keys        data.separator, train.sample_prompt, train.attention_prompt

In all of them ``\n`` is a newline, ``\t`` a tab, ``\\`` one backslash, and
``\xHH``, ``\uHHHH``, ``\UHHHHHHHH`` the character with that code, as in Python
string literals; any other backslash is kept as typed (``C:\q`` stays ``C:\q``).
A file (--prompt-file, the corpus) is taken as it is, escapes and all.

    unescape(r"하늘\n") == "하늘" + chr(10)
    unescape(r"a\\nb") == "a" + "\\" + "nb"     # a literal backslash, then n
"""

import re
import sys

# Backslash escapes, as in Python string literals. Decoding them with codecs'
# "unicode_escape" would misread non-ASCII text (it takes the str as Latin-1 bytes),
# so "하늘\n" is decoded here, one escape at a time.
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2}|[\\nrt0abfv'\"])")
# \x, \u or \U not followed by enough hexadecimal digits: a typo, not text to keep.
_TRUNCATED = re.compile(r"\\(?:x(?![0-9a-fA-F]{2})|u(?![0-9a-fA-F]{4})|U(?![0-9a-fA-F]{8}))")
_SIMPLE_ESCAPES = {
    "\\": "\\",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "0": "\0",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "'": "'",
    '"': '"',
}


# The --help text of every flag that reads escapes (see the module docstring).
ESCAPES_HELP = "escapes: \\n newline, \\t tab, \\\\ backslash, \\u00e9 a character"


def unescape_argument(name: str, text: str) -> str:
    """`unescape` for the value of flag or key ``name``, whose errors name it.

    Raises:
        ValueError: ``"--stop 'x\\u12': the escape ..."``, for a malformed escape.
    """
    try:
        return unescape(text)
    except ValueError as e:
        raise ValueError(f"{name} {text!r}: {e}") from None


def unescape(text: str) -> str:
    """Replace backslash escapes (\\n, \\t, \\r, \\\\, \\xHH, \\uHHHH, \\UHHHHHHHH, ...) by the
    characters they stand for; any other character, non-ASCII included, is kept as is,
    and so is an unknown escape such as \\q.

    Raises:
        ValueError: for \\x, \\u or \\U without its 2, 4 or 8 hexadecimal digits, and
            for a \\U escape beyond U+10FFFF.
    """

    def replace(match: re.Match) -> str:
        code = match.group(1)
        if len(code) > 1:  # \x, \u or \U followed by hexadecimal digits
            value = int(code[1:], 16)
            if value > sys.maxunicode:
                raise ValueError(f"escape \\{code} is beyond U+{sys.maxunicode:X}")
            return chr(value)
        return _SIMPLE_ESCAPES[code]

    # Escaped backslashes are matched first, so r"\\u12" stays a backslash and "u12".
    for match in re.finditer(r"\\\\|" + _TRUNCATED.pattern, text):
        if match.group() != "\\\\":
            end = text[match.start() : match.start() + 10]
            raise ValueError(
                f"the escape {end!r} needs hexadecimal digits (\\xHH, \\uHHHH, \\UHHHHHHHH); "
                "write \\\\ for a backslash"
            )
    return _ESCAPE.sub(replace, text)
