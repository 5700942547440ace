"""Our character tokenizer as a Hugging Face ``tokenizers`` tokenizer (tokenizer.json),
which ``transformers.AutoTokenizer`` loads without this project's code.

It reads text as our prompts are read (sample.py, the corpus pipeline):

1. normalizer: CRLF and lone CR become "\\n" (`data.decoding.normalize_newlines`),
   then the run's Unicode form (`data.normalization`: NFC, NFD, NFKC, NFKD or none);
2. pre-tokenizer: every code point is its own piece (a regex matching any one
   character; not grapheme clusters, so a decomposed syllable stays 2-3 tokens);
3. model: WordLevel, the vocabulary in our id order; a character outside it reads
   as a space (`unknown_stand_in`, below);
4. decoder: Fuse, the tokens joined with nothing between them (the default decoder
   would put a space between characters);
5. no post-processor: no BOS or EOS is added.

Padding (``tokenizer(prompts, padding=True)``, for batched generation): a character
vocabulary has no spare id, and a new one would need a new row in the embedding and
the LM head, changing vocab_size and the logits. So the pad token is a character of
the vocabulary, its last (the highest code point, often a rare one: "z" for Tiny
Shakespeare), on the left. The attention mask the tokenizer returns keeps every pad
out of the model's view: transformers masks those keys and counts positions from the
first real character, so a batch's greedy text is each prompt's own. The costs: as a
special token, ``decode(..., skip_special_tokens=True)`` drops that character wherever
it stands, and transformers' language-modelling collator masks its labels. The
model's config.json and generation_config.json name no pad id: given one,
``generate(ids)`` without an attention mask would infer a mask that hides every
occurrence of that character.

A character outside the vocabulary (a "1" in Shakespeare) has no id, and a new id
would change vocab_size and the logits as a new pad id would. WordLevel's unknown token
is therefore an existing character, the space: "ROMEO: 1 2" reads as "ROMEO:    ", one
id per character as before, so the model reads text of the same length and its logits
for in-vocabulary text are untouched. A space, because it ends a word and starts none:
the model continues after it as after any gap. Decoding shows where it stood in
(``decode(ids)`` gives the spaces back). transformers' own ``unk_token`` stays unset:
as a special token, ``skip_special_tokens=True`` would drop every space. A vocabulary
without a space has no stand-in, and ``tokenizers`` refuses such text ("WordLevel error:
Missing [UNK] token from the vocabulary"), where our `data.tokenizer.CharTokenizer`
names the character.
The Unicode tables are the Rust library's and Python's own, which can differ for code
points assigned in the newest Unicode version.
"""

# tokenizers and transformers are imported by the functions: importing this module
# stays cheap, and they are needed only when exporting.

NEWLINES = (("\r\n", "\n"), ("\r", "\n"))
STAND_IN = " "  # what a character outside the vocabulary reads as, if the vocabulary has it


def unknown_stand_in(chars: list[str]) -> str | None:
    """The character that a character outside ``chars`` reads as: a space, or None (such
    text is refused) for a vocabulary without one. See the module docstring for why."""
    return STAND_IN if STAND_IN in chars else None


def character_tokenizer(chars: list[str], normalization: str):
    """A ``tokenizers.Tokenizer`` that gives each character of ``chars`` its index,
    and a character outside them the id of `unknown_stand_in` (or refuses it).

    Args:
        chars: our vocabulary, in id order (a checkpoint's ``vocab``).
        normalization: the run's `data.normalization` ("nfc", "nfd", "nfkc", "nfkd"
            or "none").

    Raises:
        ValueError: for an unknown normalization.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    forms = {
        "nfc": normalizers.NFC,
        "nfd": normalizers.NFD,
        "nfkc": normalizers.NFKC,
        "nfkd": normalizers.NFKD,
    }
    if normalization not in (*forms, "none"):
        raise ValueError(f"unknown normalization {normalization!r}")
    steps = [normalizers.Replace(old, new) for old, new in NEWLINES]
    if normalization != "none":
        steps.append(forms[normalization]())
    vocab = {c: i for i, c in enumerate(chars)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=unknown_stand_in(chars)))
    tokenizer.normalizer = normalizers.Sequence(steps)
    # [\s\S]: any one code point, newlines included (a bare "." would skip "\n").
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    return tokenizer


def pad_character(chars: list[str]) -> str:
    """The character that pads a batch: the vocabulary's last, its highest code point
    (see the module docstring for why an existing one).

    Raises:
        ValueError: for an empty vocabulary.
    """
    if not chars:
        raise ValueError("an empty vocabulary has no character to pad with")
    return max(chars)  # the last, unless a fine-tuned model appended characters


def transformers_tokenizer(chars: list[str], normalization: str, block_size: int):
    """`character_tokenizer` wrapped for transformers (its ``save_pretrained`` writes
    tokenizer.json and tokenizer_config.json): decoding never tidies spaces,
    model_max_length is the model's block_size (longer inputs get transformers'
    warning), and a batch pads on the left with `pad_character`.

    Raises:
        ValueError: for an unknown normalization or an empty vocabulary.
    """
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    # normalized=True: the pad character is found in the normalized text, as every
    # other character is (found in the raw text, a combining mark after "e" would stay
    # apart where NFC joins them into "é").
    pad = AddedToken(pad_character(chars), special=True, normalized=True)
    return PreTrainedTokenizerFast(
        tokenizer_object=character_tokenizer(chars, normalization),
        clean_up_tokenization_spaces=False,
        model_max_length=block_size,
        pad_token=pad,
        padding_side="left",
    )
