"""Library notices that tell a user nothing are dropped (mlse.library_logs): sentence-transformers' "Default prompt
name is set to 'query'", which every me5-small command printed, is gone once ``mlse`` is imported; the loggers' other
warnings still pass."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

from mlse.library_logs import DROPPED, DropNotices, quiet_library_notices
from tests.paths import REPO_ROOT as ROOT

NOTICE = "Default prompt name is set to 'query'. This prompt applies unless overridden by `prompt`"


def test_the_notice_is_dropped_and_other_warnings_pass(caplog):
    quiet_library_notices()
    quiet_library_notices()  # idempotent: one filter per logger
    for name in DROPPED:
        logger = logging.getLogger(name)
        assert sum(isinstance(f, DropNotices) for f in logger.filters) == 1
        with caplog.at_level(logging.WARNING, logger=name):
            caplog.clear()
            logger.warning(NOTICE)
            logger.warning("Some other warning")
        assert [r.getMessage() for r in caplog.records] == ["Some other warning"]


def _load(folder: Path, import_mlse: bool) -> str:
    """stderr of a fresh Python that loads ``folder`` with sentence-transformers (after ``import mlse`` or not)."""
    code = ("import mlse\n" if import_mlse else "") + (
        "from sentence_transformers import SentenceTransformer\n"
        f"SentenceTransformer({str(folder)!r}, device='cpu', local_files_only=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_loading_a_model_with_a_default_prompt_prints_nothing_about_it(tiny_bert, tmp_path):
    folder = tmp_path / "prompted"
    shutil.copytree(tiny_bert, folder)
    config = folder / "config_sentence_transformers.json"
    settings = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else {}
    settings.update({"prompts": {"query": "query: "}, "default_prompt_name": "query"})  # as multilingual-e5's
    config.write_text(json.dumps(settings), encoding="utf-8")
    assert "Default prompt name is set to 'query'" in _load(folder, import_mlse=False)  # what users saw
    assert "Default prompt name" not in _load(folder, import_mlse=True)
