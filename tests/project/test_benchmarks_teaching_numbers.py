"""The teaching numbers (``results/teaching/teaching-numbers.json``) belong to the shipped artifacts they were computed
from: the file records each one's sha256 (:func:`benchmarks.teaching_numbers.artifact_hashes`), and a shipped model,
calibration, handout or result file that changed without the numbers being rewritten fails here. The guide's quotes
are checked against the numbers by ``tests/project/test_docs.py``."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.common.artifacts import artifact_hashes, stale_artifacts
from benchmarks.teaching_numbers import MAP_MODELS, PAIR_MODELS, PAIRS_FILE, ROOT, artifact_files

NUMBERS = ROOT / "results" / "teaching" / "teaching-numbers.json"
REGENERATE = "rerun `python -m benchmarks.teaching_numbers`, then update the quotes in docs/teaching.md"


def test_the_numbers_were_computed_from_the_artifacts_shipped_now():
    report = json.loads(NUMBERS.read_text(encoding="utf-8"))
    assert "artifacts" in report, f"{NUMBERS.name} records no artifact hashes: {REGENERATE}"
    stale = stale_artifacts(report["artifacts"], artifact_hashes(artifact_files(), ROOT))
    assert not stale, f"{NUMBERS.name} is older than what it quotes ({'; '.join(stale)}): {REGENERATE}"


def test_every_shipped_model_and_calibration_it_quotes_is_hashed():
    files = {p.relative_to(ROOT).as_posix() for p in artifact_files()}
    assert PAIRS_FILE.relative_to(ROOT).as_posix() in files
    for name in {*PAIR_MODELS, *MAP_MODELS}:
        if name.startswith("shipped/"):
            folder = name.removeprefix("shipped/")
            weights = [f for f in files if f"/{folder}/" in f and f.endswith(".safetensors")]
            assert weights, f"no weight file of {name} is hashed"
            assert any(f.endswith(f"/{folder}/manifest.json") for f in files), name
    for name in PAIR_MODELS:
        stem = name.replace("/", "_")
        assert f"assets/models/calibration/{stem}.json" in files, name
    assert all(Path(ROOT, f).is_file() for f in files)


def test_stale_artifacts_names_changed_gone_and_new_files():
    recorded = {"a.safetensors": "1", "b.json": "2", "c.json": "3"}
    assert stale_artifacts(recorded, dict(recorded)) == []
    current = {"a.safetensors": "9", "b.json": "2", "d.json": "4"}
    assert stale_artifacts(recorded, current) == ["a.safetensors changed", "c.json is gone", "d.json is new"]
