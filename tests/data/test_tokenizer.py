import numpy as np
import pytest

from data import CharTokenizer, CorpusError


@pytest.mark.parametrize(
    "text",
    [
        "Hello, world!\nSecond line.",
        "새가 하늘을 날았다\n고양이 생선 먹었다",
        "emoji 🙂🚀 mixed ✓ tabs\t",
    ],
)
def test_round_trip(text):
    tok = CharTokenizer.from_text(text)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert len(ids) == len(text)
    assert tok.vocab_size == len(set(text))


def test_vocabulary_is_sorted_and_ids_follow_it():
    tok = CharTokenizer.from_text("cab")
    assert tok.chars == ["a", "b", "c"]
    assert tok.encode("abc").tolist() == [0, 1, 2]
    assert tok.encode("cab").dtype == np.uint16


def test_unknown_characters_are_all_named():
    tok = CharTokenizer.from_text("abc cab bca")
    with pytest.raises(CorpusError) as err:
        tok.encode("abd!d")
    msg = str(err.value)
    assert "'d' (U+0064) at position 2" in msg
    assert "'!' (U+0021) at position 3" in msg
    assert "2 character(s)" in msg


def test_more_than_65535_symbols_use_uint32():
    chars = [chr(c) for c in range(0x4E00, 0x4E00 + 20000)] + [
        chr(c) for c in range(0x20000, 0x20000 + 50000)
    ]
    text = "".join(chars) * 2
    tok = CharTokenizer.from_text(text)
    assert tok.vocab_size == 70000
    ids = tok.encode(text)
    assert ids.dtype == np.uint32
    assert ids.max() == 69999  # no wrap-around at 65,536
    assert tok.decode(ids) == text


def test_decode_rejects_out_of_range_ids():
    tok = CharTokenizer.from_text("ab")
    with pytest.raises(ValueError, match="out of range"):
        tok.decode([0, 2])


def known_list(message: str) -> str:
    """The list in '... (N known: LIST)', maybe followed by '. The text ...'."""
    return message.split(" known: ", 1)[1].split("). ", 1)[0].removesuffix(")")


def test_the_known_characters_are_listed_apart_and_each_shows_as_itself():
    """The list of known characters ran them together: for an NFD model, ᄒ then ᅡ
    displayed as 하 in the very message that said 하 was unknown (issue 33, point
    11). Characters are separated by spaces; those that would join a neighbour or
    not show at all (conjoining jamo, combining marks, spaces, controls) are code points."""
    import unicodedata

    tok = CharTokenizer.from_text(unicodedata.normalize("NFD", "하늘 e\u0301\n"), "nfd")
    with pytest.raises(CorpusError) as err:
        tok.encode("새")
    listed = known_list(str(err.value))
    assert listed == "U+000A U+0020 e U+0301 U+1102 U+1112 U+1161 U+1173 U+11AF"
    assert not any(0x1100 <= ord(c) <= 0x11FF or unicodedata.combining(c) for c in listed)

    emoji = CharTokenizer.from_text("ab😀")
    with pytest.raises(CorpusError) as err:
        emoji.encode("c")
    assert known_list(str(err.value)) == "a b 😀"
    many = CharTokenizer([chr(c) for c in range(0x4E00, 0x4E00 + 100)])
    with pytest.raises(CorpusError) as err:
        many.encode("a")
    assert known_list(str(err.value)).endswith("\u4e4f ... and 20 more")
