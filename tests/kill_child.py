"""One job run in a child process that stops dead at a named point, for the ``kill -9`` tests (in
tests/train/test_kill9.py).

``python -m tests.kill_child POINT ARGS...`` prints POINT on stdout once it is there and then waits, so the test can
SIGKILL it at exactly that moment: mid fine-tune (after a checkpoint), mid head job (training or saving, while the run
it replaces is moved aside) or mid cache write (rows inserted, transaction not committed).
"""

from __future__ import annotations

import sys
import time

TEXTS = [f"sentence number {i}" for i in range(300)]
COMMITTED = 100  # the cache test's first write, committed before the one that is killed


def hang(point: str) -> None:
    print(point, flush=True)
    time.sleep(600)


def finetune_after_checkpoint(model: str, data_dir: str, out: str) -> None:
    from mlse.train.config import FinetuneConfig
    from mlse.train.finetune import finetune

    def progress(record: dict) -> None:
        if record["step"] >= 2:  # a training step done and a checkpoint on disk (step 0's, at least)
            hang("CHECKPOINT")

    finetune(
        FinetuneConfig(
            method="hard",
            teacher=None,
            student=model,
            pairs=["en-de"],
            max_pairs=48,
            batch_size=8,
            lr=1e-3,
            eval_every_steps=2,
            max_steps=50,
            dev_pairs=["en-de"],
            dev_max_pairs=32,
            device="cpu",
            data_dir=data_dir,
            out=out,
            budget_minutes=5,
        ),
        progress=progress,
    )


def head_job(point: str, model: str, data_dir: str, name: str) -> None:
    import safetensors.torch

    from mlse.stop_signal import StopSignal
    from mlse.train.jobs import training_job
    from mlse.train.request import TrainRequest

    if point == "SAVING":  # the first head file written into the temporary folder, the manifest not yet
        original = safetensors.torch.save_file

        def save_then_hang(*args, **kwargs):
            original(*args, **kwargs)
            hang(point)

        safetensors.torch.save_file = save_then_hang
    req = TrainRequest(
        method="stage1",
        model=model,
        name=name,
        pairs=["eng-deu"],
        max_pairs=40,
        max_epochs=3,
        budget_minutes=5,
        probe=False,
        overwrite=True,
        data_dir=data_dir,
    )

    def report(record: dict) -> None:
        if point == "TRAINING" and record.get("event") == "eval":
            hang(point)

    training_job(req)(report, StopSignal())


def cache_write() -> None:
    from mlse.encoders.cache import CachedEncoder, EmbeddingStore
    from tests.fake_encoder import FakeEncoder

    encoder = CachedEncoder(FakeEncoder())
    encoder.encode(TEXTS[:COMMITTED])

    def insert_then_hang(store, rows, dim=None):
        conn = store._connect()
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?, ?)", rows)
        hang("WRITING")

    EmbeddingStore._put_rows = insert_then_hang
    encoder.encode(TEXTS)


if __name__ == "__main__":
    point, *args = sys.argv[1:]
    if point == "CHECKPOINT":
        finetune_after_checkpoint(*args)
    elif point in ("TRAINING", "SAVING"):
        head_job(point, *args)
    elif point == "WRITING":
        cache_write()
    else:
        raise SystemExit(f"unknown point {point!r}")
    raise SystemExit(f"finished without reaching {point}")
