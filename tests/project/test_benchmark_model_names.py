"""Benchmarks given a registry name in quick mode, in the fast tier (tests/project/test_benchmark_defaults.py runs every
name through every script, slow-marked): ``int8_options --model muse`` is refused in one line before anything is written
(muse runs a graph of its own, no ONNX export to quantise), and ``gpu_student --student minilm-en`` rebuilds its
student from the packed adapter (its check once loaded the name ``minilm-en`` as a folder and crashed)."""

from __future__ import annotations

import json

import pytest

from mlse.errors import MlseError
from tests.project.test_benchmarks_quick import run_in_process
from tests.stand_in_models import StandIns, install, write_tiny_me5


def test_int8_options_refuses_muse_in_one_line_before_writing(tmp_path):
    from benchmarks import int8_options

    out = tmp_path / "out"
    with pytest.raises(MlseError) as refused:
        int8_options.main(["--quick", "--model", "muse", "--threads", "1", "--out", str(out)])
    message = str(refused.value)
    assert message.startswith("muse has no ONNX export (UseEncoder runs a graph of its own)"), message
    assert "int8 options apply to transformer encoders" in message and "\n" not in message
    assert not out.exists()  # refused before the output folder or any variant was made


def test_gpu_student_quick_takes_a_registry_name(tiny_bert, tmp_path, monkeypatch):
    """``minilm-en`` is the tiny BERT here (tests/stand_in_models.py): the run trains, packs, and its student rebuilt
    from the adapter encodes as the trained one; the base it compares with is found through the registry."""
    me5 = write_tiny_me5(tmp_path / "me5")  # listed (never loaded) when the registry resolves a name
    install(StandIns(str(me5), str(tiny_bert), str(tmp_path / "hf-cache")), monkeypatch.setattr, monkeypatch.setenv)
    out, runs = tmp_path / "out", tmp_path / "runs"
    argv = ["--quick", "--student", "minilm-en", "--runs", str(runs), "--out", str(out)]
    assert run_in_process("gpu_student", argv, monkeypatch) is None
    trained = json.loads((out / "gpu-train.json").read_text())
    assert [r["steps"] for r in trained["runs"].values()] == [2]
    saved = json.loads((runs / next(iter(trained["runs"])) / "finetune_config.json").read_text())
    assert saved["student"] == "minilm-en"  # the name, not a folder: what check_rebuilt resolves
