"""Numbers pinned from the code before the training package was split (commit 5ed28c5).

Every fine-tuning method, the students' recipes (bridge, LoRA, frozen embeddings) and both heads are trained for a few
steps on a tiny BERT whose tokenizer is built deterministically here (the session's ``tiny_bert`` learns its WordPiece
vocabulary with a trainer whose ties fall differently in every process, so its numbers are not reproducible). The
losses, dev scores, learning rates, EMA taus, best steps and embeddings of the saved model must match what the old
``mlse/finetune.py`` and ``mlse/training.py`` wrote: moving code must not change a number. The values are not to be
re-made to fit new code.

The old code's numbers depend on the CPU: on an AVX2-only CPU the dev Spearman of the untrained tiny model (64
almost-equal cosines, ranked) differs from an AVX-512 CPU's in the first decimal, and with it which checkpoint is
kept, while every training loss is equal to the last bit. So the old code (commit 16675d4, this file's ``run_case``
and ``run_heads``) was run on both kinds: ``fixtures/train-pinned.json`` on an AMD EPYC with AVX-512,
``fixtures/train-pinned-avx2.json`` on an AMD EPYC with AVX2 only. A run must equal one of them; the tolerance only
absorbs floating-point summation order.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from mlse.dirs import runs_dir
from mlse.encoders.load import load_encoder
from mlse.train.config import FinetuneConfig
from mlse.train.finetune import finetune
from mlse.train.head_training import train_stage1, train_stage2
from tests.tiny_models import _save_sentence_transformer, training_sentences

FIXTURES = Path(__file__).parent / "fixtures"
PINNED = {"AVX-512 CPU": FIXTURES / "train-pinned.json", "AVX2-only CPU": FIXTURES / "train-pinned-avx2.json"}
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TEXTS = ["Hello world.", "Hallo Welt.", "A cat sits on the mat."]

# case -> (teacher: None, "bert" or "labse"; what differs from the common tiny run)
CASES: dict[str, tuple[str | None, dict]] = {
    "mse": ("bert", dict(method="mse")),
    "mse-no-src": ("bert", dict(method="mse", include_src=False)),
    "ema": (None, dict(method="ema", tau_base=0.9)),
    "soft-priority-tcm": ("bert", dict(method="soft", label="priority", tcm_alpha=1.0)),
    "soft-average": ("bert", dict(method="soft", label="average", temperature=0.05)),
    "hard": (None, dict(method="hard")),
    "hard-no-bucket": (None, dict(method="hard", bucket_by_length=False)),
    "mse-bridge": ("labse", dict(method="mse", bridge="linear", bridge_sentences=16)),
    "hard-lora": (None, dict(method="hard", lora_r=4, eval_at_start=False)),
    "hard-frozen-embeddings": (None, dict(method="hard", freeze_embeddings=True, lr=1e-2)),
}
# wall-clock dependent: never compared
CLOCK_KEYS = {"elapsed_s", "wall_s", "sentences_per_s", "pairs_per_s", "train_s", "eval_s", "prepare_s",
              "estimated_total_steps", "teacher_encode_s", "teacher_cache"}  # fmt: skip
# a hash of trained weights: equal here, but another CPU's last bits change it (the weights' numbers are compared)
LAST_BITS = {"teacher_checksum_end"}


def build_fixed_bert(data_dir: Path, out: Path, *, labse_like: bool = False) -> Path:
    """The tiny BERT of ``tests.tiny_models`` with a vocabulary chosen by rule (every character, then the most
    frequent words, ties alphabetical), so that the model is the same in every process."""
    import torch
    from tokenizers import normalizers, pre_tokenizers
    from transformers import BertConfig, BertModel, BertTokenizerFast

    norm, split = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    words = Counter(w for s in training_sentences(data_dir) for w, _ in split.pre_tokenize_str(norm.normalize_str(s)))
    chars = sorted({c for w in words for c in w})
    vocab = [*SPECIALS, *chars, *(f"##{c}" for c in chars)]
    vocab += [w for w, _ in sorted(words.items(), key=lambda kv: (-kv[1], kv[0])) if w not in set(vocab)]
    vocab = vocab[:2000]
    hf_dir = out.parent / f"{out.name}-hf"
    hf_dir.mkdir(parents=True)
    (hf_dir / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    fast = BertTokenizerFast(vocab_file=str(hf_dir / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(fast), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)  # fmt: skip
    BertModel(config).save_pretrained(hf_dir)
    fast.save_pretrained(hf_dir)
    if labse_like:
        return _save_sentence_transformer(hf_dir, out, "cls", dense_out=24)
    return _save_sentence_transformer(hf_dir, out, "mean")


@pytest.fixture(scope="module")
def fixed(tmp_path_factory, data_dir) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fixed-models")
    return {"bert": build_fixed_bert(data_dir, root / "bert"), "labse": build_fixed_bert(data_dir, root / "labse",
                                                                                           labse_like=True)}


@pytest.fixture(scope="module")
def pinned() -> dict[str, dict]:
    """CPU kind -> what the old code wrote on such a CPU."""
    return {kind: json.loads(path.read_text(encoding="utf-8")) for kind, path in PINNED.items()}


def run_case(case: str, fixed: dict[str, Path]) -> dict:
    """A 4-step run (8 en-de pairs a batch, dev every 2 steps on 64 rows, fp32) and what it wrote, clocks left out."""
    teacher, extra = CASES[case]
    settings = dict(teacher=str(fixed[teacher]) if teacher else None, student=str(fixed["bert"]), pairs=["en-de"],
                    max_pairs=32, budget_minutes=5.0, max_steps=4, batch_size=8, lr=1e-3, eval_every_steps=2,
                    dev_pairs=["en-de"], dev_max_pairs=64, precision="fp32", out=str(runs_dir() / case))  # fmt: skip
    records: list[dict] = []
    metrics = finetune(FinetuneConfig(**{**settings, **extra}), progress=records.append)
    out = runs_dir() / case
    emb = load_encoder(str(out / "model"), cache=False).encode(TEXTS)  # [3, d]
    return {
        "records": [{k: v for k, v in r.items() if k not in CLOCK_KEYS and k not in DEVICE_RECORDS} for r in records],
        "metrics": {k: v for k, v in metrics.items() if k not in CLOCK_KEYS and k not in DEVICE_RECORDS},
        "embedding": [round(float(x), 7) for x in emb.ravel()],
        "files": sorted(p.name for p in out.iterdir()),
        "config": {k: v for k, v in json.loads((out / "finetune_config.json").read_text()).items()
                   if k not in CLOCK_KEYS and k not in ("out", "student", "teacher", "versions", "data_files",
                                                        "teacher_identity", *DEVICE_RECORDS)},  # fmt: skip
    }


# What a run records about the machine and where its pairs came from (not a training number): the GPU, whether it
# computes bf16 natively, whether fp16 loss scaling ran, and the bitext source (data directory or shipped sample).
DEVICE_RECORDS = ("gpu", "native_bf16", "grad_scaler", "grad_scale", "training_data")


def run_heads(fixed: dict[str, Path], data_dir: Path) -> dict:
    s1 = train_stage1(str(fixed["bert"]), out=runs_dir() / "s1", pairs=["eng-deu", "eng-fra"], max_pairs=60,
                      data_dir=data_dir, probe=False, max_epochs=6, patience=2)  # fmt: skip
    s2 = train_stage2(runs_dir() / "s1", out=runs_dir() / "s2", pairs=["en-de"], data_dir=data_dir, max_epochs=4,
                      nonlinearity="sigmoid")  # fmt: skip
    x = np.random.default_rng(0).normal(size=(3, 32)).astype(np.float32)
    return {
        "stage1_history": [{k: v for k, v in r.items() if k != "seconds"} for r in s1.stage1.history_],
        "stage1_best_epoch": s1.stage1.best_epoch_,
        "stage1_meaning": [round(float(v), 6) for v in s1.stage1.transform(x).ravel()],
        "stage2_history": s2.stage2.history_,
        "stage2_best_epoch": s2.stage2.best_epoch_,
        "stage2_embedding": [round(float(v), 6) for v in s2.stage2.transform(x).ravel()],
        "metrics": s2.metadata["metrics"],
    }


def assert_same(got, want, where: str = "") -> None:
    """Equal structure, equal strings / ints / bools, floats equal up to summation order."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for k in set(want) - LAST_BITS:
            assert_same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {got} != {want}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(got, bool):
        assert got == pytest.approx(want, rel=1e-4, abs=1e-5), f"{where}: {got} != {want}"
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def assert_same_as_one(got, pinned: dict[str, dict], case: str) -> None:
    """``got`` equals what the old code wrote for ``case`` on one of the CPU kinds; else every mismatch is named."""
    mismatches = []
    for kind, runs in pinned.items():
        try:
            assert_same(got, runs[case], case)
            return
        except AssertionError as exc:
            mismatches.append(f"{kind}: {exc}")
    raise AssertionError("; ".join(mismatches))


@pytest.mark.parametrize("case", list(CASES))
def test_fine_tuning_numbers_are_unchanged(case, fixed, pinned):
    assert_same_as_one(run_case(case, fixed), pinned, case)


def test_head_numbers_are_unchanged(fixed, pinned, data_dir):
    assert_same_as_one(run_heads(fixed, data_dir), pinned, "heads")


def test_a_changed_number_is_caught(pinned):
    changed = json.loads(json.dumps(pinned["AVX2-only CPU"]["mse"]))
    changed["records"][1]["loss"] *= 1.001
    with pytest.raises(AssertionError, match="loss"):
        assert_same_as_one(changed, pinned, "mse")
