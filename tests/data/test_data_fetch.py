"""Fetching the app's datasets, offline: a local stand-in laid out like the three hub repositories (parquet files
written here), served by a fake ``snapshot_download`` that honours ``allow_patterns`` with huggingface_hub's own
filter and refuses the gated FLORES+ repository without a token. Then every tab's message on an empty data dir."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from mlse.data import fetch, fetch_status
from mlse.data.flores import flores_languages, load_flores
from mlse.data.stsb import load_sts
from mlse.data.tatoeba import load_tatoeba, tatoeba_languages
from mlse.errors import DataError

STS = {"en": ("A man plays.", "NA", 2.5), "de": ("Ein Mann spielt.", "NA (de)", 2.5)}


def write_parquet(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path, index=False)


@pytest.fixture()
def stand_in_hub(tmp_path) -> Path:
    """Three repositories as published: STS in per-language split shards, FLORES+ devtest (and a dev split that must
    not be downloaded) with Chinese as cmn_*, rows stored out of id order, Tatoeba as ``test/{xxx}-eng`` tables."""
    hub = tmp_path / "hub"
    sts = hub / "PhilipMay/stsb_multi_mt"
    for lang, (s1, s2, score) in STS.items():
        write_parquet(
            sts / lang / "test-00000-of-00002.parquet", [{"sentence1": s1, "sentence2": s2, "similarity_score": score}]
        )
        write_parquet(
            sts / lang / "test-00001-of-00002.parquet",
            [{"sentence1": f"{lang} second, with comma", "sentence2": "b", "similarity_score": 0.0}],
        )
        write_parquet(
            sts / lang / "train-00000-of-00001.parquet",
            [{"sentence1": "t1", "sentence2": "t2", "similarity_score": 5.0}],
        )
    flores = hub / "openlanguagedata/flores_plus"
    for lang, script in (("eng", "Latn"), ("deu", "Latn"), ("cmn", "Hans"), ("fin", "Latn")):
        rows = [{"id": i, "iso_639_3": lang, "iso_15924": script, "text": f"{lang} sentence {i}"} for i in (2, 1)]
        write_parquet(flores / "devtest" / f"{lang}_{script}.parquet", rows)
        write_parquet(flores / "dev" / f"{lang}_{script}.parquet", rows)
    tatoeba = hub / "mteb/tatoeba-bitext-mining"
    for code, pairs in (("deu", [("Hallo\nWelt", "Hello world"), ("Ja", "Yes")]), ("fra", [("Oui", "Yes")])):
        write_parquet(tatoeba / "test" / f"{code}-eng.parquet", [{"sentence1": a, "sentence2": b} for a, b in pairs])
    return hub


@pytest.fixture()
def served(stand_in_hub, tmp_path, monkeypatch):
    """snapshot_download over the stand-in; returns the list of calls (repo, patterns, token)."""
    import huggingface_hub
    from huggingface_hub.errors import GatedRepoError
    from huggingface_hub.utils import filter_repo_objects

    calls = []

    def fake_snapshot_download(repo_id, *, repo_type=None, allow_patterns=None, token=None, **_):
        calls.append((repo_id, allow_patterns, token))
        assert repo_type == "dataset"
        if repo_id == "openlanguagedata/flores_plus" and not token:
            import httpx

            request = httpx.Request("GET", f"https://huggingface.co/api/datasets/{repo_id}")
            raise GatedRepoError("gated", response=httpx.Response(401, request=request))
        repo = stand_in_hub / repo_id
        files = [str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()]
        snapshot = tmp_path / "snapshots" / repo_id
        for name in filter_repo_objects(files, allow_patterns=allow_patterns):
            (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(repo / name, snapshot / name)
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(fetch_status, "_status", fetch_status.FetchStatus())
    return calls


def test_fetch_missing_builds_what_the_loaders_read(served, tmp_path):
    data, lines = tmp_path / "data", []
    outcome = fetch.fetch_missing(data, progress=lines.append, token="hf_test")
    assert outcome == {"stsb_multi_mt": None, "tatoeba": None, "flores200": None}
    assert [repo for repo, _, _ in served] == [
        "PhilipMay/stsb_multi_mt",
        "mteb/tatoeba-bitext-mining",
        "openlanguagedata/flores_plus",
    ]
    assert lines[0].startswith("[1/3] fetching STS Multi MT from PhilipMay/stsb_multi_mt")
    assert any(line.startswith("[3/3] FLORES+ devtest ready: 3 files") for line in lines)

    sts = load_sts("en-de", "test", data)  # two shards of one split, in order; "NA" stays text
    assert sts.s1 == ["A man plays.", "en second, with comma"] and sts.s2 == ["NA (de)", "b"]
    assert sts.scores.tolist() == [2.5, 0.0]
    assert load_sts("de", "train", data).scores.tolist() == [5.0]

    assert flores_languages(data) == ["deu_Latn", "eng_Latn", "zho_Hans"]  # cmn -> zho; fin is not one of ours
    assert load_flores(["zho_Hans"], data)["zho_Hans"] == ["cmn sentence 1", "cmn sentence 2"]  # ordered by id
    assert not any((tmp_path / "snapshots/openlanguagedata/flores_plus/dev").rglob("*"))  # dev split not fetched

    assert tatoeba_languages(data) == ["deu", "fra"]
    tat = load_tatoeba("deu", data)
    assert tat.src == ["Hallo Welt", "Ja"] and tat.tgt == ["Hello world", "Yes"]
    assert fetch.fetch_missing(data, progress=lines.append) == {}  # nothing missing: nothing downloaded again
    assert len(served) == 3


def test_gated_flores_without_a_token_fails_alone_and_says_how(served, tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    data = tmp_path / "data"
    outcome = fetch.fetch_missing(data, progress=lambda line: None)
    assert outcome["stsb_multi_mt"] is None and outcome["tatoeba"] is None
    assert "gated" in outcome["flores200"] and "HF_TOKEN" in outcome["flores200"]
    assert not (data / "flores200_devtest").exists()  # nothing half-made left behind
    with pytest.raises(
        DataError,
        match=r"FLORES\+ devtest \(needed by the Map tab\) is missing: its download failed "
        r"\(cannot download openlanguagedata/flores_plus: it is gated",
    ):
        flores_languages(data)


def test_start_fetch_reports_an_unreachable_hub_once(tmp_path, monkeypatch):
    monkeypatch.setattr(fetch_status, "_status", fetch_status.FetchStatus())
    lines = []
    thread = fetch.start_fetch(tmp_path, progress=lines.append, reachable=lambda: False)
    thread.join(10)
    assert lines == [
        "not fetching stsb_multi_mt, tatoeba, flores200: the hub is not reachable from here (no network, "
        "or HF_HUB_OFFLINE is set)"
    ]
    with pytest.raises(
        DataError,
        match=r"Tatoeba \(LASER test set\) \(needed by the Tatoeba tab\) is missing: its "
        r"download failed \(the hub is not reachable",
    ):
        tatoeba_languages(tmp_path)


def test_a_dataset_being_downloaded_says_so(tmp_path, monkeypatch):
    busy = fetch_status.FetchStatus(running="stsb_multi_mt", waiting=["flores200"])
    monkeypatch.setattr(fetch_status, "_status", busy)
    with pytest.raises(DataError, match="being downloaded from PhilipMay/stsb_multi_mt now; try again in a minute"):
        load_sts("en-de", "test", tmp_path)
    with pytest.raises(DataError, match="queued for download after stsb_multi_mt"):
        flores_languages(tmp_path)


def test_cli_data_fetch_all_fetches_the_missing_ones(served, tmp_path, monkeypatch, capsys):
    from mlse.cli.main import main

    assert main(["data", "fetch", "--to", str(tmp_path / "d"), "--dataset", "tatoeba"]) == 0
    assert tatoeba_languages(tmp_path / "d") == ["deu", "fra"]
    code = main(["data", "fetch", "--to", str(tmp_path / "d")])  # the fake refuses FLORES+: no token was passed
    assert code == 2
    err = capsys.readouterr().err
    assert "not fetched: flores200 (cannot download openlanguagedata/flores_plus: it is gated" in err
    assert load_sts("en", "test", tmp_path / "d").s1[0] == "A man plays."


# --- every tab on an empty data directory says what is missing and how to get it -------------------------------


@pytest.fixture()
def empty_state(tmp_path, monkeypatch):
    from mlse.serving.app_state import AppState
    from tests.fake_encoder import FakeEncoder

    monkeypatch.setattr(fetch_status, "_status", fetch_status.FetchStatus())
    state = AppState(data_dir=str(tmp_path))
    monkeypatch.setattr(state, "encoder", lambda name: FakeEncoder())
    return state


def test_map_tab_names_flores_and_the_fetch_command(empty_state, tmp_path):
    from mlse.ui import map_tab

    _, _, warning = map_tab.language_choices(empty_state)
    warning = warning.replace("\\", "")  # the tab escapes Markdown
    assert "FLORES+ devtest (needed by the Map tab) is missing" in warning
    assert f"python -m mlse data fetch --dataset flores200 --to {tmp_path}" in warning
    out = map_tab.project_map(empty_state, "fake", ["eng_Latn", "deu_Latn"], 10)
    assert "FLORES+ devtest (needed by the Map tab) is missing" in out.note.replace("\\", "")


def test_tatoeba_tab_names_the_missing_dataset(empty_state):
    from mlse.ui import tatoeba_tab

    summary, table = tatoeba_tab.retrieval(empty_state, "deu", "fake")
    summary = summary.replace("\\", "")  # the tab escapes Markdown
    assert "Tatoeba (LASER test set) (needed by the Tatoeba tab) is missing" in summary and table.empty


def test_gold_tab_names_the_missing_dataset(empty_state):
    from mlse.ui import gold_tab

    *_, table, message = gold_tab.predicted_vs_gold(empty_state, "en-de", ["fake"])
    message = message.replace("\\", "")  # the tab escapes Markdown
    assert "STS Multi MT (needed by the Gold tab" in message and table.empty


def test_finetune_data_that_cannot_be_fetched_says_so(tmp_path):
    from mlse.data import parallel_pairs

    with pytest.raises(DataError, match="Tatoeba-Challenge bitext .* is missing; mlse cannot download it"):
        parallel_pairs(tmp_path)
