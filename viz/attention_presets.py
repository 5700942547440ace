"""The prompts the explorer's page offers as buttons: the Korean chapters' example
sentences, and a few lines of the run's own text.

The chapters teach self-attention on short sentences; a model trained on Korean text
can be asked about the very same ones, as long as their characters are in its
vocabulary (a character-level model knows no other). A model of another language gets
its run's own prompts instead (train.attention_prompt, train.sample_prompt).
"""

from data.decoding import normalize_newlines
from data.escapes import unescape_argument

# The chapters' sentences, in the order they appear; the last three share 배 (pear,
# boat, belly) and show one character read three ways from its context.
CHAPTER_SENTENCES = (
    "새가 하늘을 날았다",
    "고양이 생선 먹었다",
    "나는 라면을 먹었다",
    "배를 먹었다",
    "배를 탔다",
    "배가 아프다",
)
# 배 read from what comes before it: pear, boat, belly. In the chapters' sentences 배 is
# at position 0, where the causal mask lets it see only itself: its weights and its
# prediction are the same in all three, and the words after it change only the rows
# after it. A causal model reads a word from what precedes it, so these put different
# words before 배 (the page says so beside the presets); the sample's vocabulary holds
# every character.
LATER_SENTENCES = (
    "사과와 배를 먹었다",
    "바다 위에 배가 떠 있었다",
    "많이 먹어서 배가 아프다",
)


def prompt_presets(tokenizer, block_size: int, own_text: tuple[str, ...] = ()) -> list[dict]:
    """The page's preset prompts for a model.

    The chapters' sentences are listed when at least one of them is in the vocabulary,
    each with the characters it lacks (the page shows those disabled, saying why);
    ``own_text`` lines only when every character is known, cut to block_size.

    Args:
        tokenizer: the checkpoint's CharTokenizer (``normalize``, ``chars``).
        block_size: the model's context length in characters.
        own_text: the run's own prompts, e.g. its train.attention_prompt.

    Returns:
        A list of ``{"text", "source": "chapter", "later" (`LATER_SENTENCES`) or "run",
        "missing": [characters]}``, without repeats.
    """
    known = set(tokenizer.chars)

    def entry(text: str, source: str) -> dict:
        text = tokenizer.normalize(text)
        missing = [c for c in dict.fromkeys(text) if c not in known]
        return {"text": text, "source": source, "missing": missing}

    chapter = [entry(s, "chapter") for s in CHAPTER_SENTENCES]
    later = [entry(s, "later") for s in LATER_SENTENCES]
    presets = chapter + later if any(not e["missing"] for e in chapter) else []
    seen = {e["text"] for e in presets}
    for text in own_text:
        e = entry(text[:block_size], "run")
        if e["text"] and not e["missing"] and e["text"] not in seen:
            presets.append(e)
            seen.add(e["text"])
    return presets


def run_prompts(config: dict | None) -> tuple[str, ...]:
    """The run's own prompts from a checkpoint's resolved config (train.attention_prompt,
    train.sample_prompt, escapes read), offered by the page as presets."""
    train = (config or {}).get("train", {})
    prompts = []
    for key in ("attention_prompt", "sample_prompt"):
        value = train.get(key)
        if isinstance(value, str) and value:
            try:
                prompts.append(normalize_newlines(unescape_argument(f"train.{key}", value)))
            except ValueError:
                continue  # a prompt that cannot be read is not worth a button
    return tuple(prompts)
