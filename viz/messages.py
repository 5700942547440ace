"""The attention page's words, in Korean and English: one catalogue for the page, its
``--html`` files and ``explore_attention.py --steps``.

The catalogue is ``viz/page/messages.json``: ``{key: {"en": text, "ko": text}}``, where a
text may hold ``{name}`` placeholders and ``[[term|shown words]]`` links to the page's
glossary (``glossary.<term>.name`` / ``.text``). The page receives the same catalogue
in its data block and renders a message the same way (viz/page/i18n.js). The Korean
follows the seed chapters' terms: 어텐션 점수, 가중치, 가중합, 인과 마스크, 쿼리·키·밸류.

To add words (a new section of the page): add its keys to messages.json, each with "en"
and "ko" (a section's prefix, e.g. "block.mlp.title"); use them as ``t("key", {args})`` or
``richEl(tag, "key", args)`` in viz/page/*.js and ``say("key", lang, **args)`` here.
tests/viz/test_messages.py fails on a key missing in either language, or used and absent.

    say("step.heading", "ko", chapter=6, name=Message("chapter.6"))
    say(Message("switch.no_mask"), "en")
    message_json(Message("step.q.title", {"note": Message("qk.rope")}))
"""

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

CATALOGUE_PATH = Path(__file__).with_name("page") / "messages.json"
LANGUAGES = ("en", "ko")
PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
# A glossary link: [[term|the words shown]]; in a terminal only the words are printed.
LINK = re.compile(r"\[\[([a-z_]+)\|([^\]]+)\]\]")
# A placeholder, with the particle written after it in its neutral form if any: {char}(이)가.
PLACEHOLDER_PARTICLE = re.compile(r"\{([a-z_]+)\}(?:(['’]?)\((은|이|을|과|으)\)(는|가|를|와|로))?")
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3
FINAL_RIEUL = 8  # ㄹ: takes 로, not 으로
# What a particle looks past to the word it follows: a closing "(...)" and quotes.
TRAILING_ASIDE = re.compile(r"['’\"]*(?:\s*\([^()]*\))?$")


def load_catalogue(path: Path = CATALOGUE_PATH) -> dict[str, dict[str, str]]:
    """The catalogue, ``{key: {language: text}}``.

    Raises:
        OSError: if the file cannot be read; ValueError if it is not such JSON.
    """
    catalogue = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(catalogue, dict):
        raise ValueError(f"{path} must hold one JSON object of messages")
    return catalogue


CATALOGUE = load_catalogue()


@dataclass(frozen=True)
class Message:
    """A message of the catalogue with its values, rendered in any language later.

    Args:
        key: a key of the catalogue, e.g. "step.q.title".
        args: values of its ``{name}`` placeholders: text, numbers, or Messages.
    """

    key: str
    args: dict = field(default_factory=dict)


def check_language(lang: str) -> str:
    """``lang`` if the catalogue has it ("en", "ko").

    Raises:
        ValueError: naming the languages there are.
    """
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}: use one of {', '.join(LANGUAGES)}")
    return lang


def particle(word: str, with_final: str, without_final: str) -> str:
    """The Korean particle that fits after ``word``.

    A Hangul syllable's final consonant is ``(code - 0xAC00) % 28`` (0: none). With one,
    the first form (은, 이, 을, 과, 으로; but 로 after ㄹ); without, the second (는, 가, 를,
    와, 로); after anything not a Hangul syllable (a digit, a Latin letter, a space), the
    neutral "(은)는" that reads right either way. A closing parenthetical and quotes are
    skipped, as Korean spelling does: "'다'(위치 9)" takes 가, after 다. viz/page/i18n.js
    does the same.

    Args:
        word: the text the particle follows (non-empty).
        with_final: "은", "이", "을", "과" or "으" (for 으로).
        without_final: "는", "가", "를", "와" or "로".
    """
    word = TRAILING_ASIDE.sub("", word) or word
    code = ord(word[-1])
    if not HANGUL_FIRST <= code <= HANGUL_LAST:
        return f"({with_final}){without_final}"
    final = (code - HANGUL_FIRST) % 28
    if final == 0 or (with_final == "으" and final == FINAL_RIEUL):
        return without_final
    return "으로" if with_final == "으" else with_final


def say(message: "Message | str", lang: str = "en", **args) -> str:
    """A message as plain text in ``lang``: placeholders filled (Messages in them rendered
    too), glossary links reduced to their words.

    Args:
        message: a `Message`, or a key (its values then given as keyword arguments).
        lang: "en" or "ko".

    Raises:
        KeyError: for a key the catalogue lacks, or a placeholder with no value.
    """
    if isinstance(message, str):
        message = Message(message, args)
    text = CATALOGUE[message.key][check_language(lang)]

    def value(match: re.Match) -> str:
        v = message.args[match.group(1)]
        word = say(v, lang) if isinstance(v, Message) else str(v)
        if match.group(3) is None:
            return word
        return word + match.group(2) + particle(word, match.group(3), match.group(4))

    return LINK.sub(r"\2", PLACEHOLDER_PARTICLE.sub(value, text))


def message_json(message: Message) -> dict:
    """A `Message` as the page reads it: ``{"key", "args"}``, nested Messages alike."""
    args = {
        name: message_json(v) if isinstance(v, Message) else v for name, v in message.args.items()
    }
    return {"key": message.key, "args": args}
