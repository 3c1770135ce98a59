"""Portable records: manifests and result files name files relative to the data directory, the cache or
the repository, never by an absolute path; old records still read; ``python -m mlse records migrate`` rewrites them.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from mlse.cli.main import main
from mlse.data.hashing import file_sha256
from mlse.data.portable import (
    data_identity,
    find_absolute_paths,
    portable_path,
    portable_record,
    portable_text,
    resolve_record_path,
)
from mlse.data.portable_migration import migrate_records, text_files
from mlse.runs.shipped import ShippedArtifact, check_files, read_shipped_manifest
from tests.fake_encoder import FakeEncoder
from tests.paths import REPO_ROOT as ROOT

RAW_PATTERNS = ("/work/", "/root/", "/home/", "/tmp/", "/Users/", "C:\\", "file://")

# assets/models/heads/muse+s1/manifest.json as shipped before the migration (four of its data files kept)
OLD_MANIFEST = """{
 "title": "s1 heads (seed grid, seed 0)",
 "backbone": "muse",
 "backbone_identity": "muse:30dda750055f9888",
 "command": "python -m mlse reproduce assets --only muse+s1",
 "data": {
  "/work/shared/data/parallel/tatoeba_challenge_v2021-08-07/ara-eng/tatoeba-test-v2021-08-07.eng": "8c2e22aa222b8d21b890c56e6508b2b9fa63df65225f66b72c8602f4baf426dd",
  "/work/shared/data/parallel/tatoeba_challenge_v2021-08-07/ara-eng/tatoeba-test-v2021-08-07.ara": "cf210526bd68c21f06af0e236f55c6355079e7523a21529091a0e65c9204055b",
  "/work/shared/data/parallel/tatoeba_challenge_v2021-08-07/eng-fra/tatoeba-test-v2021-08-07.eng": "714a848bd6ab4421cafd1b9b09fd26328306fab1bc8006e820fa77a8cbe57636",
  "/work/shared/data/parallel/tatoeba_challenge_v2021-08-07/eng-fra/tatoeba-test-v2021-08-07.fra": "095313ff04016e5ddeff7557d1c5590f19724d239e424cab313b2d03ca66d365"
 },
 "variant": "s1",
 "scores": {"cross-12": 61.62, "en-en": 71.38},
 "kind": "scorer",
 "name": "muse+s1",
 "files": {}
}
"""  # noqa: E501
# the PEFT model card shipped beside the student's adapter before the migration (its first lines)
OLD_CARD = """---
base_model: /root/.cache/mlse/converted/me5-small-1571fc9827503943-v1
library_name: peft
tags:
- base_model:adapter:/root/.cache/mlse/converted/me5-small-1571fc9827503943-v1
- lora
---
"""


# ---------------------------------------------------------------------------------------------- the path forms
def test_paths_under_the_data_directory_the_cache_and_the_repository_round_trip(tmp_path, monkeypatch):
    data, cache = tmp_path / "data", tmp_path / "cache"
    (data / "stsb_multi_mt").mkdir(parents=True)
    (cache / "converted").mkdir(parents=True)
    monkeypatch.setenv("MLSE_CACHE", str(cache))
    csv = data / "stsb_multi_mt" / "stsb-de-test.csv"
    assert portable_path(csv, data) == "data:stsb_multi_mt/stsb-de-test.csv"
    assert resolve_record_path("data:stsb_multi_mt/stsb-de-test.csv", data) == csv
    assert portable_path(cache / "converted" / "m", data) == "cache:converted/m"
    assert resolve_record_path("cache:converted/m", data) == cache / "converted" / "m"
    sample = ROOT / "assets" / "data" / "finetune-bitext" / "deu-eng.tsv.gz"
    assert portable_path(sample, data) == "repo:assets/data/finetune-bitext/deu-eng.tsv.gz"
    assert resolve_record_path(portable_path(sample, data), data) == sample
    assert portable_path(data, data) == "data:."
    # the deepest root wins: a data directory inside the cache names its files from the data directory
    inner = cache / "data"
    (inner / "flores200_devtest").mkdir(parents=True)
    devtest = inner / "flores200_devtest" / "eng_Latn.devtest"
    assert portable_path(devtest, inner) == "data:flores200_devtest/eng_Latn.devtest"


def test_a_path_outside_every_root_keeps_only_its_name_and_does_not_resolve(tmp_path, monkeypatch):
    monkeypatch.setenv("MLSE_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "data"
    data.mkdir()
    mine = tmp_path / "elsewhere" / "mine.tsv"
    assert portable_path(mine, data) == "outside:mine.tsv"
    assert resolve_record_path("outside:mine.tsv", data) is None
    assert portable_path("outside:mine.tsv", data) == "outside:mine.tsv"  # already portable: unchanged


def test_old_absolute_paths_of_another_machine_map_by_their_tail(tmp_path, monkeypatch):
    monkeypatch.setenv("MLSE_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "data"
    (data / "stsb_multi_mt").mkdir(parents=True)
    (data / "stsb_multi_mt" / "stsb-de-test.csv").write_text("a,b,1\n")
    old = "/mnt/old-box/shared/data/stsb_multi_mt/stsb-de-test.csv"
    assert resolve_record_path(old, data) == data / "stsb_multi_mt" / "stsb-de-test.csv"
    assert portable_path(old, data, legacy=True) == "data:stsb_multi_mt/stsb-de-test.csv"
    assert portable_path(old, data) == "outside:stsb-de-test.csv"  # a writer guesses nothing
    windows = "C:\\Users\\ann\\data\\parallel\\tatoeba_challenge_v2021-08-07\\deu-eng\\x.deu"
    assert portable_path(windows, data, legacy=True) == "data:parallel/tatoeba_challenge_v2021-08-07/deu-eng/x.deu"
    assert portable_path("file:///home/ann/.cache/mlse/converted/m", data, legacy=True) == "cache:converted/m"
    assert resolve_record_path("/mnt/old-box/unknown/file.txt", data) is None
    # older calibration manifests wrote paths relative to the data directory, without a prefix
    assert resolve_record_path("stsb_multi_mt/stsb-de-test.csv", data) == data / "stsb_multi_mt" / "stsb-de-test.csv"


def test_free_text_keeps_urls_routes_and_relative_paths():
    text = (
        "model /work/runs/s1:0123abcd, see https://huggingface.co/datasets/a/b, POST /gradio_api/run/score, "
        "read /proc/cpuinfo and results/app/x.json; saved under /tmp/run-7."
    )
    assert find_absolute_paths(text) == ["/work/runs/s1", "/tmp/run-7."]
    out = portable_text(text)
    assert "model outside:s1:0123abcd," in out and out.endswith("saved under outside:run-7.")
    assert "https://huggingface.co/datasets/a/b" in out and "/gradio_api/run/score" in out and "/proc/cpuinfo" in out
    assert find_absolute_paths(out) == []


def test_a_checkout_outside_the_usual_machine_roots_is_still_found(monkeypatch):
    # CI checks out the repository under /check/...; only the repository root itself says the path is this machine's
    import mlse.data.portable as portable

    monkeypatch.setattr(portable, "MACHINE_ROOTS", frozenset())
    inside = f"{ROOT}/runs/s1"
    text = f"model {inside}:fe122c22 and /proc/cpuinfo"
    assert find_absolute_paths(text) == [inside]
    assert portable_text(text) == "model repo:runs/s1:fe122c22 and /proc/cpuinfo"


def test_data_identity_depends_on_content_and_place_not_on_the_form():
    a = {"data:stsb_multi_mt/a.csv": "1" * 64, "data:stsb_multi_mt/b.csv": "2" * 64}
    assert data_identity(a) == data_identity({"stsb_multi_mt/b.csv": "2" * 64, "stsb_multi_mt/a.csv": "1" * 64})
    assert data_identity(a) != data_identity({**a, "data:stsb_multi_mt/b.csv": "3" * 64})
    assert data_identity(a) != data_identity({"data:other/a.csv": "1" * 64, "data:stsb_multi_mt/b.csv": "2" * 64})
    assert len(data_identity(a)) == 16


def test_colliding_keys_keep_both_values():
    record = portable_record({"/tmp/a/x.tsv": "1" * 64, "/tmp/b/x.tsv": "2" * 64})
    assert record == {"outside:x.tsv": "1" * 64, "outside:x.tsv#2": "2" * 64}


# ----------------------------------------------------------------------------------------------- old records
def test_an_old_manifest_with_absolute_paths_still_reads_and_its_files_check_out(tmp_path, data_dir):
    folder = tmp_path / "heads" / "muse+s1"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(OLD_MANIFEST)
    manifest = read_shipped_manifest(folder)
    assert _found_here(manifest["data"], data_dir)  # every file found here with its recorded sha256
    # the same record written on a machine whose data lived elsewhere: mapped onto this data directory by the tail
    moved = {k.replace("/work/shared/data/", "/srv/box-2/datasets/"): v for k, v in manifest["data"].items()}
    assert _found_here(moved, data_dir)
    paths = [resolve_record_path(k, data_dir) for k in moved]
    assert all(p is not None and p.is_file() and data_dir in p.parents for p in paths)
    assert not _found_here({next(iter(moved)): "0" * 64}, data_dir)


def _found_here(hashes: dict[str, str], data_dir) -> bool:
    """Every file a record names is found here (:func:`resolve_record_path`) with the sha256 it recorded."""
    paths = {key: resolve_record_path(key, data_dir) for key in hashes}
    return all(p is not None and p.is_file() and file_sha256(p) == hashes[k] for k, p in paths.items())


# -------------------------------------------------------------------------------------------------- migration
def _old_tree(root: Path) -> dict[str, Path]:
    head = root / "models" / "heads" / "muse+s1"
    head.mkdir(parents=True)
    scorer = {
        "format": "mlse-scorer/1",
        "backbone": "muse",
        "data": json.loads(OLD_MANIFEST)["data"],
        "stage1_run": "/work/runs-exp/assets/muse+s1",
    }
    (head / "scorer.json").write_text(json.dumps(scorer, indent=2))
    (head / "stage1.json").write_text("{}")
    manifest = json.loads(OLD_MANIFEST)
    manifest["files"] = {n: hashlib.sha256((head / n).read_bytes()).hexdigest() for n in ("scorer.json", "stage1.json")}
    (head / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    student = root / "models" / "students" / "s"
    student.mkdir(parents=True)
    (student / "README.md").write_text(OLD_CARD)
    card = {"README.md": hashlib.sha256(OLD_CARD.encode()).hexdigest()}
    (student / "manifest.json").write_text(json.dumps({**manifest, "kind": "lora-student", "files": card}, indent=1))
    results = root / "results"
    results.mkdir()
    result = {
        "model": "Flöte",
        "model_identity": f"{ROOT}/runs/s1:fe122c22",
        "runs_dir": "/tmp/empty-runs",
        "config": {"pairs_files": ["C:\\Users\\ann\\pairs.tsv"]},
        "data": json.loads(OLD_MANIFEST)["data"],
    }
    (results / "sts.json").write_text(json.dumps(result, indent=2, ensure_ascii=True))  # no final newline
    (results / "notes.md").write_text("Written to /tmp/run-1/out.json from https://huggingface.co/x/y.\n")
    (results / "blob.gz").write_bytes(gzip.compress(b"/work/keep/me"))
    return {"head": head, "student": student, "results": results}


def test_migration_rewrites_old_records_keeps_layouts_and_manifests_and_is_idempotent(tmp_path, capsys):
    tree = _old_tree(tmp_path)
    blob = (tree["results"] / "blob.gz").read_bytes()
    assert main(["records", "migrate", "--check", str(tmp_path)]) == 1
    assert "6 file(s) hold absolute paths" in capsys.readouterr().out
    assert main(["records", "migrate", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "rewrote " in out and "(new hash of scorer.json)" in out and "(new hash of README.md)" in out
    assert main(["records", "migrate", "--check", str(tmp_path)]) == 0
    assert migrate_records([tmp_path]).changed == {}  # a second run changes nothing

    for kind, sub in (("scorer", "head"), ("lora-student", "student")):
        folder = tree[sub]
        item = ShippedArtifact("shipped/" + folder.name, kind, folder, read_shipped_manifest(folder))
        assert check_files(item) == []  # the manifest lists the rewritten files' new hashes
    manifest = read_shipped_manifest(tree["head"])
    assert set(manifest["data"]) == {
        "data:parallel/tatoeba_challenge_v2021-08-07/ara-eng/tatoeba-test-v2021-08-07.eng",
        "data:parallel/tatoeba_challenge_v2021-08-07/ara-eng/tatoeba-test-v2021-08-07.ara",
        "data:parallel/tatoeba_challenge_v2021-08-07/eng-fra/tatoeba-test-v2021-08-07.eng",
        "data:parallel/tatoeba_challenge_v2021-08-07/eng-fra/tatoeba-test-v2021-08-07.fra",
    }
    assert manifest["data_identity"] == data_identity(manifest["data"])
    assert list(manifest).index("data_identity") == list(manifest).index("data") + 1
    assert (tree["head"] / "manifest.json").read_text().startswith('{\n "title"')  # indent 1 kept
    scorer = json.loads((tree["head"] / "scorer.json").read_text())
    assert scorer["stage1_run"] == "outside:muse+s1"
    assert "base_model: cache:converted/me5-small-1571fc9827503943-v1" in (tree["student"] / "README.md").read_text()
    text = (tree["results"] / "sts.json").read_text()
    assert text.startswith('{\n  "model": "Fl\\u00f6te"') and not text.endswith("\n")  # indent 2, ASCII, no newline
    result = json.loads(text)
    assert result["model_identity"] == "repo:runs/s1:fe122c22" and result["runs_dir"] == "outside:empty-runs"
    assert result["config"]["pairs_files"] == ["outside:pairs.tsv"]
    notes = (tree["results"] / "notes.md").read_text()
    assert notes == "Written to outside:out.json from https://huggingface.co/x/y.\n"
    assert (tree["results"] / "blob.gz").read_bytes() == blob  # binary files are never touched


def test_migration_names_a_missing_folder(tmp_path, capsys):
    assert main(["records", "migrate", str(tmp_path / "nope")]) == 2
    assert "no such file or folder" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ the writers
@pytest.fixture()
def small_data(tmp_path, data_dir):
    """A data directory in tmp with the first rows of the en/de STS dev and test files."""
    root = tmp_path / "data"
    (root / "stsb_multi_mt").mkdir(parents=True)
    for lang in ("en", "de"):
        for split in ("dev", "test"):
            name = f"stsb-{lang}-{split}.csv"
            lines = (data_dir / "stsb_multi_mt" / name).read_text(encoding="utf-8").split("\n")[:40]
            (root / "stsb_multi_mt" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_an_evaluation_result_names_its_files_portably(small_data, tmp_path, monkeypatch):
    from mlse.evaluation.runners import run_sts

    monkeypatch.setenv("MLSE_CACHE", str(tmp_path / "cache"))
    mine = tmp_path / "user" / "mine.tsv"
    mine.parent.mkdir()
    mine.write_text("sentence1\tsentence2\tscore\n" + "".join(f"a {i}\tb {i}\t{i % 5}\n" for i in range(12)))
    result = run_sts(FakeEncoder(), pairs=["en-de"], pairs_files=[mine], data_dir=small_data, n_boot=0)
    path = result.write_json(tmp_path / "out" / "sts.json")
    text = path.read_text(encoding="utf-8")
    assert str(tmp_path) not in text and find_absolute_paths(text) == []
    record = json.loads(text)
    assert set(record["data"]) == {
        "data:stsb_multi_mt/stsb-en-test.csv",
        "data:stsb_multi_mt/stsb-de-test.csv",
        "outside:mine.tsv",
    }
    assert record["config"]["pairs_files"] == ["outside:mine.tsv"]
    assert record["data_identity"] == data_identity(record["data"])
    assert _found_here({k: v for k, v in record["data"].items() if k.startswith("data:")}, small_data)


def test_a_calibration_manifest_names_its_files_portably(small_data, tmp_path, monkeypatch):
    from mlse.calibration import backbone as bc

    monkeypatch.setenv("MLSE_CACHE", str(tmp_path / "cache"))
    calibration, report = bc.fit_calibration(FakeEncoder(), data_dir=small_data, pairs=["en-de"], max_rows=30)
    _, manifest_path = bc.save_calibration(calibration, report, tmp_path / "calibration", command="test")
    text = manifest_path.read_text(encoding="utf-8")
    assert str(tmp_path) not in text and find_absolute_paths(text) == []
    manifest = json.loads(text)
    assert sorted(manifest["data"]) == [
        f"data:stsb_multi_mt/stsb-{lang}-{split}.csv" for lang in ("de", "en") for split in ("dev", "test")
    ]
    assert manifest["data_identity"] == data_identity(manifest["data"])


# ---------------------------------------------------------------------------------------------- the repository
def test_no_absolute_path_in_any_text_file_under_assets_or_results():
    files = text_files([p for p in (ROOT / "assets", ROOT / "results") if p.exists()])
    assert files
    found = {}
    for path in files:
        text = path.read_text(encoding="utf-8")
        hits = find_absolute_paths(text) + [p for p in RAW_PATTERNS if p in text]
        if hits:
            found[str(path.relative_to(ROOT))] = hits[:3]
    assert not found, f"absolute paths (run `python -m mlse records migrate`): {found}"
