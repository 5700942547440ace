"""The data pipeline's own error type."""


class CorpusError(ValueError):
    """A corpus, its cache or a text to encode cannot be used; the message says why
    and what to do about it."""
