"""A visitor's file or pasted text, read for a tab: the one reader (:mod:`mlse.data.user_files`) within this
deployment's limits, with the messages a page shows.

:func:`read_upload` skips and lists bad rows, names the file by its own name and, in public mode, deletes it once
read. When the app is served, only an upload of the calling session is read (any other path is refused first).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from mlse.data.user_files import UserTable, read_table
from mlse.errors import MlseError
from mlse.public_mode import public_mode, upload_limits
from mlse.serving.upload_folder import active, client_key
from mlse.ui.text import md_escape

MAX_SHOWN_PROBLEMS = 10


def display_name(path: str) -> str:
    """The name a visitor gave the file: Gradio keeps it as the last part of the temporary path."""
    return Path(path).name or "uploaded file"


def upload_path(file) -> str | None:
    """Gradio hands a file as a path string, a dict with ``path``, or an object with ``.name`` / ``.path``."""
    if file is None or file == "":
        return None
    if isinstance(file, str | os.PathLike):
        return str(file)
    if isinstance(file, dict):
        return file.get("path") or file.get("name")
    return getattr(file, "path", None) or getattr(file, "name", None)


def limits_note() -> str:
    """One line for the page: how large an upload may be here."""
    rows, size = upload_limits()
    where = "this public deployment" if public_mode() else "this app"
    return f"Files up to {rows:,} rows and {size / 1e6:g} MB on {where}: TSV, CSV or JSONL, UTF-8, header optional."


def read_upload(file, pasted: str | None, *, kind, gold_range=None) -> tuple[UserTable | None, str]:
    """(the table, or None; a markdown message saying what was read and the skipped rows, or why nothing was) from an
    uploaded file or, when none, pasted text. ``kind``: what the tab takes (:func:`mlse.data.user_files.read_table`)."""
    path = upload_path(file)
    text = pasted if isinstance(pasted, str) and pasted.strip() else None
    if path is None and text is None:
        return None, "Upload a file or paste rows first."
    max_rows, max_bytes = upload_limits()
    folder = active()
    if path is not None and folder is not None:  # a served app: only this session's own uploads
        try:
            session, client = caller()
            path = str(folder.claim(path, session, md_escape(display_name(path)), client))
        except MlseError as exc:
            return None, str(exc)  # already escaped: the message names the file by its escaped display name
    if path is not None and not os.path.exists(path):
        return None, (
            f"{md_escape(display_name(path))}: the uploaded file is gone (uploads are deleted once read"
            f"{' on this public deployment' if public_mode() else ''}); upload it again."
        )
    source = {"source": path, "name": display_name(path)} if path is not None else {"text": text}
    try:
        table = read_table(
            **source, kind=kind, gold_range=gold_range, bad_rows="skip", max_rows=max_rows, max_bytes=max_bytes
        )
    except MlseError as exc:
        return None, md_escape(str(exc))
    finally:
        if path is not None and public_mode():
            _remove(path)
    return table, read_message(table)


def read_message(table: UserTable) -> str:
    """ "Read 30 sentence pairs from pairs.tsv (sentence1, sentence2)." plus the skipped rows, escaped for markdown."""
    noun = {"pairs": "sentence pair", "sentences": "sentence", "parallel": "parallel row"}.get(table.kind, "row")
    lines = [
        f"Read {len(table):,} {noun}{'' if len(table) == 1 else 's'} from {md_escape(table.name)}"
        + (f" ({', '.join(md_escape(c) for c in table.columns)})." if table.has_header else ".")
    ]
    if table.n_skipped:
        shown = [md_escape(str(p)) for p in table.skipped[:MAX_SHOWN_PROBLEMS]]
        more = table.n_skipped - len(shown)
        lines.append(
            f"**{table.n_skipped:,} row(s) skipped:** "
            + "; ".join(shown)
            + (f"; and {more:,} more." if more > 0 else ".")
        )
    return "\n\n".join(lines)


def caller() -> tuple[str | None, str | None]:
    """(session, client address) of the Gradio event being handled; (None, None) outside one, or when Gradio is not
    loaded. The address is read as :func:`mlse.serving.upload_folder.client_key` reads it."""
    context = sys.modules.get("gradio.context")
    request = context.LocalContext.request.get(None) if context is not None else None
    if request is None:
        return None, None
    headers = getattr(request, "headers", None) or {}
    peer = getattr(getattr(request, "client", None), "host", None)
    return getattr(request, "session_hash", None) or None, client_key(headers.get, peer)


def _remove(path: str) -> None:
    folder = active()
    if folder is not None:
        folder.release(path)
        return
    with contextlib.suppress(OSError):  # already gone, or Gradio's cache cleaner got there first
        os.remove(path)
