r"""Backslash escapes in text typed on a command line or in YAML: sample.py's --stop
('\n\n') and data.separator ('\n') spell newlines and tabs this way.

    unescape(r"하늘\n") == "하늘" + chr(10)
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
