"""Our character tokenizer as a Hugging Face ``tokenizers`` tokenizer (tokenizer.json),
which ``transformers.AutoTokenizer`` loads without this project's code.

It reads text as our prompts are read (sample.py, the corpus pipeline):

1. normalizer: CRLF and lone CR become "\\n" (`data.decoding.normalize_newlines`),
   then the run's Unicode form (`data.normalization`: NFC, NFD, NFKC, NFKD or none);
2. pre-tokenizer: every code point is its own piece (a regex matching any one
   character; not grapheme clusters, so a decomposed syllable stays 2-3 tokens);
3. model: WordLevel, the vocabulary in our id order, without an unknown token;
4. decoder: Fuse, the tokens joined with nothing between them (the default decoder
   would put a space between characters);
5. no post-processor and no special tokens: no BOS or EOS is added.

Text with a character outside the vocabulary cannot be encoded (the model has no id
for it): ``tokenizers`` raises "WordLevel error: Missing [UNK] token from the
vocabulary", where our `data.tokenizer.CharTokenizer` names the character.
The Unicode tables are the Rust library's and Python's own, which can differ for code
points assigned in the newest Unicode version.
"""

# tokenizers and transformers are imported by the functions: importing this module
# stays cheap, and they are needed only when exporting.

NEWLINES = (("\r\n", "\n"), ("\r", "\n"))


def character_tokenizer(chars: list[str], normalization: str):
    """A ``tokenizers.Tokenizer`` that gives each character of ``chars`` its index.

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
    tokenizer = Tokenizer(models.WordLevel({c: i for i, c in enumerate(chars)}, unk_token=None))
    tokenizer.normalizer = normalizers.Sequence(steps)
    # [\s\S]: any one code point, newlines included (a bare "." would skip "\n").
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    return tokenizer


def transformers_tokenizer(chars: list[str], normalization: str, block_size: int):
    """`character_tokenizer` wrapped for transformers (its ``save_pretrained`` writes
    tokenizer.json and tokenizer_config.json): decoding never tidies spaces, and
    model_max_length is the model's block_size (longer inputs get transformers'
    warning).

    Raises:
        ValueError: for an unknown normalization.
    """
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=character_tokenizer(chars, normalization),
        clean_up_tokenization_spaces=False,
        model_max_length=block_size,
    )
