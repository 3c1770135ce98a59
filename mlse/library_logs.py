"""Notices the libraries under mlse log that tell its users nothing, dropped where they are logged (one filter).

sentence-transformers' ``Default prompt name is set to ...`` notice is dropped: mlse feeds e5's prompt on purpose
(:func:`mlse.encoders.identity.text_prefix`). Every other message of those loggers still passes.
"""

from __future__ import annotations

import logging

# logger -> the beginnings of the messages dropped from it
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
