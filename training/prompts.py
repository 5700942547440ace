"""Fixed prompts for what a run shows at each evaluation, made usable for any corpus.

The defaults (``train.sample_prompt: "ROMEO:"``, ``train.attention_prompt: "To be, or
not to be"``) suit Tiny Shakespeare; a Korean corpus has none of those letters, and a
model cannot be fed a character outside its vocabulary. Rather than stop a training
run over a picture, such a prompt is replaced by text the corpus certainly has.
"""

import warnings

import numpy as np

from data.escapes import unescape
from data.normalization import continues_cluster, safe_cut, whole_cut
from data.tokenizer import CharTokenizer


class PromptFallbackWarning(UserWarning):
    """A configured prompt had characters outside the vocabulary and was replaced."""


def usable_prompt(
    prompt: str,
    tokenizer: CharTokenizer,
    val_ids: np.ndarray,
    key: str,
    max_chars: int | None = None,
) -> str:
    """``prompt`` itself if it fits and the vocabulary has all its characters, else a
    stand-in.

    The prompt's escapes (``\\n``, see `data.escapes`) are read first, as sample.py
    reads --prompt's. The prompt is then put in the corpus's normalisation form (as every text given
    to the model is). A prompt longer than ``max_chars`` is cut to its first
    ``max_chars`` characters. A prompt with characters outside the vocabulary is
    replaced by about as many characters from the start of the first full line of the
    validation split (from its very start if no line fits): held-out text of the
    corpus, so every character is known and the text reads like the corpus. No cut
    splits a character: a decomposed syllable or an accent stays whole
    (`data.normalization.safe_cut`), so a cut may keep a few code points fewer.

    Args:
        prompt: the configured prompt (non-empty).
        tokenizer: the corpus's tokenizer.
        val_ids: (N,) token ids of the validation split.
        key: the config key the prompt came from, for the warnings.
        max_chars: the longest prompt the caller can use (e.g. block_size), or None.

    Returns:
        A non-empty prompt of at most len(prompt) (and max_chars) code points, all in
        the vocabulary.

    Warns:
        PromptFallbackWarning: saying what was cut or replaced, and by what.
    """
    prompt = tokenizer.normalize(unescape(prompt))  # as --prompt reads it (data.escapes)
    if max_chars is not None and len(prompt) > max_chars:
        cut = safe_cut(prompt, max_chars) or max_chars  # one cluster longer than the context
        warnings.warn(
            f"{key} has {len(prompt)} characters, more than the model's context "
            f"({max_chars}); using its first {cut}",
            PromptFallbackWarning,
            stacklevel=2,
        )
        prompt = prompt[:cut]
    known = set(tokenizer.chars)
    missing = [c for c in dict.fromkeys(prompt) if c not in known]
    if not missing:
        return prompt
    n = len(prompt)
    # Enough text to find a line start and n characters after it.
    text = tokenizer.decode(val_ids[: 4 * n + 256])
    start = text.find("\n") + 1
    if len(text) - start < n:
        start = 0
    while start < len(text) - 1 and continues_cluster(text[start]):
        start += 1  # the validation split may begin inside a character
    rest = text[start:]
    replacement = rest[: whole_cut(rest, n)]
    shown = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in missing[:8])
    warnings.warn(
        f"{key}={prompt!r} has characters the corpus lacks ({shown}); using "
        f"{replacement!r} from the validation text instead. Set {key} to text in the "
        "corpus's own script to choose it yourself.",
        PromptFallbackWarning,
        stacklevel=2,
    )
    return replacement
