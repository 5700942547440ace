r"""How text typed on a command line or in a config is read: backslash escapes, the
same for every flag and key that takes text.

    sample.py          --prompt, --stop
    explore_attention.py  --prompt
    config keys        data.separator, train.sample_prompt, train.attention_prompt

In all of them ``\n`` is a newline, ``\t`` a tab, ``\\`` one backslash, and
``\xHH``, ``\uHHHH``, ``\UHHHHHHHH`` the character with that code, as in Python
string literals; any other backslash is kept as typed (``C:\q`` stays ``C:\q``).
A UTF-16 surrogate pair, as JSON writes a character beyond U+FFFF
(``\ud83d\ude00``), is that character (😀); half a pair alone (a lone surrogate,
U+D800-U+DFFF) is no character and is refused, as is a byte that is not UTF-8 in a
command-line argument (Python keeps it as one).
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

    A surrogate pair (``\\ud83d\\ude00``, escaped or not) becomes the one character it
    encodes (UTF-16, RFC 2781).

    Raises:
        ValueError: for \\x, \\u or \\U without its 2, 4 or 8 hexadecimal digits,
            for a \\U escape beyond U+10FFFF, and for a lone surrogate (half a pair,
            or a byte that was not UTF-8), named with its position.
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
    return join_surrogate_pairs(_ESCAPE.sub(replace, text))


def join_surrogate_pairs(text: str) -> str:
    """``text`` with each UTF-16 surrogate pair (a high surrogate U+D800-U+DBFF, then a
    low one U+DC00-U+DFFF) replaced by the character it encodes.

    Raises:
        ValueError: for a lone surrogate, naming it and its position.
    """
    if not _SURROGATE.search(text):
        return text
    joined = _SURROGATE_PAIR.sub(_pair_to_character, text)
    lone = _SURROGATE.search(joined)
    if lone:
        code = ord(lone.group())
        cause = (
            f"a byte 0x{code - 0xDC00:02x} that is not UTF-8, or "
            if 0xDC80 <= code <= 0xDCFF
            else ""
        )
        raise ValueError(
            f"lone surrogate \\u{code:04x} at position {lone.start()}: {cause}half of a UTF-16 "
            "surrogate pair, which is no character on its own. Write the whole pair "
            "(\\ud83d\\ude00), the character itself, or its \\U escape (\\U0001f600)"
        )
    return joined


_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _pair_to_character(match: re.Match) -> str:
    high, low = (ord(c) for c in match.group())
    return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
