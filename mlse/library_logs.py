"""Notices the libraries under mlse log that tell its users nothing, dropped where they are logged (one filter).

sentence-transformers warns, once per process, ``Default prompt name is set to 'query'. This prompt applies unless
overridden ...`` whenever it loads a model whose configuration names a default prompt. multilingual-e5 does, and mlse
feeds that prompt on every path on purpose (:func:`mlse.encoders.identity.text_prefix`), so every ``me5-small``
command printed it. :func:`quiet_library_notices` (called when ``mlse`` is imported, before any model loads) drops
exactly those messages; every other warning of the same loggers still passes.
"""

from __future__ import annotations

import logging

# logger -> the beginnings of the messages dropped from it (sentence-transformers 6 logs from base.model, 3-5 from
# SentenceTransformer)
DROPPED = {
    "sentence_transformers.base.model": ("Default prompt name is set to ",),
    "sentence_transformers.SentenceTransformer": ("Default prompt name is set to ",),
}


class DropNotices(logging.Filter):
    """Drops the records whose message starts with one of ``prefixes``."""

    def __init__(self, prefixes: tuple[str, ...]):
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefixes)


def quiet_library_notices() -> None:
    """Put the filters of :data:`DROPPED` on their loggers (once: calling again adds nothing)."""
    for name, prefixes in DROPPED.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, DropNotices) for f in logger.filters):
            logger.addFilter(DropNotices(prefixes))
