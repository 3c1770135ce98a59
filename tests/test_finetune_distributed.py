"""Data-parallel fine-tuning: two CPU processes under torchrun (gloo) train the same model as one group."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from mlse.encoders import load_encoder, runs_dir


def test_torchrun_two_processes_average_gradients_and_rank0_writes_the_run(tiny_bert, data_dir):
    out = runs_dir() / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "mlse",
           "finetune", "--method", "mse", "--teacher", str(tiny_bert), "--student", str(tiny_bert), "--pairs", "en-de",
           "--max-pairs", "48", "--batch-size", "8", "--lr", "1e-3", "--max-steps", "3", "--eval-every", "3",
           "--dev-pairs", "en-de", "--dev-max-pairs", "32", "--device", "cpu", "--data-dir", str(data_dir),
           "--extend-vocab", "500", "--out", str(out)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    reports = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert sorted(r.get("rank", 0) for r in reports) == [0, 1]
    assert all(r["world_size"] == 2 and r["steps"] == 3 for r in reports)
    # rank 1 loads rank 0's extended student, gradients are averaged: both ranks end bit-identical
    assert len({r["parameter_checksum"] for r in reports}) == 1
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["pairs_seen"] == 2 * 3 * 8
    assert not (out / ".initial-model").exists()
    assert load_encoder(str(out), cache=False).encode(["ein Test"]).shape == (1, 32)
