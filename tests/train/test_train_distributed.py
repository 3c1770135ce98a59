"""Data-parallel fine-tuning: two CPU processes under torchrun (gloo) train the same model as one group."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from mlse.dirs import runs_dir
from mlse.encoders.load import load_encoder


def test_torchrun_two_processes_average_gradients_and_rank0_writes_the_run(tiny_bert, data_dir):
    out = runs_dir() / "ddp"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "mlse",
        "finetune",
        "--method",
        "mse",
        "--teacher",
        str(tiny_bert),
        "--student",
        str(tiny_bert),
        "--pairs",
        "en-de",
        "--max-pairs",
        "48",
        "--batch-size",
        "8",
        "--lr",
        "1e-3",
        "--max-steps",
        "3",
        "--eval-every",
        "3",
        "--dev-pairs",
        "en-de",
        "--dev-max-pairs",
        "32",
        "--device",
        "cpu",
        "--data-dir",
        str(data_dir),
        "--extend-vocab",
        "500",
        "--out",
        str(out),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # one summary line, from rank 0 (two ranks printing at once used to land on one line now and then)
    reports = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(reports) == 1, done.stdout
    report = reports[0]
    assert report["world_size"] == 2 and report["steps"] == 3
    # rank 1 loads rank 0's extended student, gradients are averaged: both ranks end bit-identical
    assert len(report["rank_checksums"]) == 2 and set(report["rank_checksums"]) == {report["parameter_checksum"]}
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["pairs_seen"] == 2 * 3 * 8
    assert not (out / ".initial-model").exists()
    assert load_encoder(str(out), cache=False).encode(["ein Test"]).shape == (1, 32)


def test_a_finished_worker_exits_with_its_code_and_loses_no_output():
    # os._exit skips the interpreter's teardown (where gloo's threads can abort a finished run): whatever Python still
    # buffers must be written first, and the code must reach the launcher
    code = (
        "import logging, sys\n"
        "logging.basicConfig(stream=sys.stderr, level=logging.INFO)\n"
        "from mlse.train.distributed import exit_worker\n"
        "sys.stdout.write('summary without a newline')\n"
        "logging.getLogger('w').info('logged last')\n"
        "exit_worker(3)\n"
        "print('never')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert done.stdout == "summary without a newline" and "logged last" in done.stderr
