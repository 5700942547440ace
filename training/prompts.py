"""Fixed prompts for what a run shows at each evaluation, made usable for any corpus.

The defaults (``train.sample_prompt: "ROMEO:"``, ``train.attention_prompt: "To be, or
not to be"``) suit Tiny Shakespeare; a Korean corpus has none of those letters, and a
model cannot be fed a character outside its vocabulary. Rather than stop a training
run over a picture, such a prompt is replaced by text the corpus certainly has.
"""

import warnings

import numpy as np

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

    A prompt longer than ``max_chars`` is cut to its first ``max_chars`` characters.
    A prompt with characters outside the vocabulary is replaced by as many characters
    from the start of the first full line of the validation split (from its very
    start if no line fits): held-out text of the corpus, so every character is known
    and the text reads like the corpus.

    Args:
        prompt: the configured prompt (non-empty).
        tokenizer: the corpus's tokenizer.
        val_ids: (N,) token ids of the validation split.
        key: the config key the prompt came from, for the warnings.
        max_chars: the longest prompt the caller can use (e.g. block_size), or None.

    Returns:
        A non-empty prompt of at most len(prompt) (and max_chars) characters, all in
        the vocabulary.

    Warns:
        PromptFallbackWarning: saying what was cut or replaced, and by what.
    """
    if max_chars is not None and len(prompt) > max_chars:
        warnings.warn(
            f"{key} has {len(prompt)} characters, more than the model's context "
            f"({max_chars}); using its first {max_chars}",
            PromptFallbackWarning,
            stacklevel=2,
        )
        prompt = prompt[:max_chars]
    known = set(tokenizer.chars)
    missing = [c for c in dict.fromkeys(prompt) if c not in known]
    if not missing:
        return prompt
    n = len(prompt)
    # Enough text to find a line start and n characters after it.
    text = tokenizer.decode(val_ids[: 4 * n + 256])
    start = text.find("\n") + 1
    replacement = text[start : start + n] if len(text) - start >= n else text[:n]
    shown = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in missing[:8])
    warnings.warn(
        f"{key}={prompt!r} has characters the corpus lacks ({shown}); using "
        f"{replacement!r} from the validation text instead. Set {key} to text in the "
        "corpus's own script to choose it yourself.",
        PromptFallbackWarning,
        stacklevel=2,
    )
    return replacement
