"""Stop strings of sample.py (cli/stop_sequences.py): matching per row, held-back
prefixes, and the escapes --stop understands."""

import pytest

from cli.stop_sequences import StopSequences
from data.escapes import unescape

# --- stop sequences ------------------------------------------------------------------


def feed(stops, rows):
    """Push rows of tokens (one list per sequence, equal lengths) and collect output."""
    out = [[] for _ in rows]
    for step in zip(*rows, strict=True):
        for row, ids in enumerate(stops.push(step)):
            out[row] += ids
    for row, ids in enumerate(stops.flush()):
        out[row] += ids
    return out


def test_stop_sequence_ends_each_row_on_its_own():
    stops = StopSequences([[1, 2]], batch_size=3)
    out = feed(stops, [[5, 1, 3, 1, 2, 7], [1, 2, 9, 9, 9, 9], [4, 4, 4, 4, 4, 1]])
    assert out == [[5, 1, 3], [], [4, 4, 4, 4, 4, 1]]  # row 3: held 1 released at the end
    assert stops.finished == [True, True, False] and not stops.all_finished


def test_stop_prefix_is_held_back_until_it_cannot_match():
    stops = StopSequences([[1, 1, 2]], batch_size=1)
    assert stops.push([1]) == [[]]
    assert stops.push([1]) == [[]]
    assert stops.push([1]) == [[1]]  # "1 1 1": only the first 1 can no longer start a match
    assert stops.push([2]) == [[]] and stops.finished == [True]
    assert stops.push([5]) == [[]]  # finished rows ignore further tokens


def test_longest_of_simultaneous_stops_is_removed():
    assert feed(StopSequences([[2], [1, 2]], 1), [[3, 1, 2, 4]]) == [[3]]
    with pytest.raises(ValueError, match="stop"):
        StopSequences([[]], 1)


def test_unescape_understands_escapes_and_keeps_non_ascii():
    assert unescape(r"\n\n") == "\n\n"
    assert unescape(r"하늘\n") == "하늘\n"
    assert unescape(r"\t\\\x41\u00e9\U0001F600") == "\t\\Aé\U0001f600"
    assert unescape(r"a\q") == r"a\q"
    assert unescape("새가") == "새가"
    assert unescape(r"\\u12") == r"\u12"  # an escaped backslash, then text


@pytest.mark.parametrize("typo", [r"\u12", r"a\x4", r"\U0001F60", r"--\u"])
def test_unescape_rejects_an_escape_cut_short(typo):
    """An x, u or U escape without its hexadecimal digits is a typo, not text to keep."""
    with pytest.raises(ValueError, match="needs hexadecimal digits"):
        unescape(typo)
