"""The data pipeline: character tokenizer, corpus preparation and batches."""

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
