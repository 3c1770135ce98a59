"""Every artifact shipped under assets/models still matches the code that loads it.

A shipped head or LoRA student is only meaningful on the exact backbone weights it was trained on, and its manifest
records the scores it reached. So, on the real files of this checkout: the files are the ones the manifest lists,
the sizes stay within the Space's limits, the manifest's backbone identity is the identity of the backbone loaded
here, and the en-de STS test Spearman recomputed from the shipped files equals the recorded one within 0.1. A change
to the e5 converter, the USE port, the heads' code or a package pin that moves any of these fails here, in the
default test run (not marked slow: CI runs it).
"""

from __future__ import annotations

import pytest

from mlse.encoders.load import load_encoder
from mlse.evaluation.runners import run_sts
from mlse.experiments.assets import HEADS, STUDENTS
from mlse.models import load_model
from mlse.runs.shipped import check_files, list_shipped, shipped_root, total_bytes

MB = 1_000_000  # decimal, as the before-stop hook counts
SHIPPED = {item.name.removeprefix("shipped/"): item for item in list_shipped()}


def test_every_artifact_the_reproduce_command_makes_is_shipped():
    assert sorted(SHIPPED) == sorted([*HEADS, *STUDENTS])


def test_sizes_stay_within_the_limits():
    files = [p for p in shipped_root().rglob("*") if p.is_file()]
    assert files and max(p.stat().st_size for p in files) <= 3 * MB
    assert total_bytes() <= 15 * MB


@pytest.fixture(scope="module")
def en_de_now(data_dir, tmp_path_factory):
    """en-de Spearman of every shipped artifact, recomputed once for the module (one embedding cache for all)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLSE_CACHE", str(tmp_path_factory.mktemp("shipped-cache")))
        mp.setenv("HF_HUB_OFFLINE", "1")
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(2)
        try:
            return {
                name: float(
                    run_sts(load_model(item.name), pairs=["en-de"], data_dir=data_dir, n_boot=0).scores["en-de"][
                        "spearman"
                    ]
                )
                for name, item in SHIPPED.items()
            }
        finally:
            torch.set_num_threads(threads)


@pytest.mark.parametrize("name", sorted([*HEADS, *STUDENTS]))
def test_shipped_artifact_matches_its_manifest_and_backbone(name, en_de_now):
    item = SHIPPED[name]
    assert check_files(item) == []
    manifest = item.manifest
    assert manifest["command"].startswith("python -m mlse reproduce assets")
    assert manifest["data"] and all(len(digest) == 64 for digest in manifest["data"].values())
    assert manifest["backbone_identity"] == load_encoder(manifest["backbone"], cache=False).identity
    recorded = manifest["scores"]["sts_test_spearman"]["en-de"]
    assert abs(en_de_now[name] - recorded) <= 0.1, (name, en_de_now[name], recorded)
