"""The data pipeline: character tokenizer, corpus preparation and batches, and the run
config's `data:` section (data/settings.py)."""

from data.batches import BatchSampler, evaluation_windows
from data.corpus import Corpus, prepare_corpus
from data.errors import CorpusError
from data.tokenizer import CharTokenizer

__all__ = [
    "BatchSampler",
    "CharTokenizer",
    "Corpus",
    "CorpusError",
    "evaluation_windows",
    "prepare_corpus",
]
