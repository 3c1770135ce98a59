"""ONNX backends (fp32 and dynamic int8): agreement with torch, the export cache, identities, CLI and scorer wiring.

Agreement is checked on L2-normalised embeddings of real STS/Tatoeba sentences (several languages, one text longer than
the model's max_seq_length so that truncation is exercised, one empty text):
- fp32: max |onnx - torch| <= 1e-4 (measured ~3e-7 on minilm-en; only float summation order differs);
- int8: cosine to torch >= 0.97 for every sentence and >= 0.994 on average, max |int8 - torch| <= 0.05. Measured on
  minilm-en over all 2,552 STS en test sentences: mean cosine 0.996, worst sentence 0.979, max abs 0.036 (the test's
  400 sentences: 0.997 / 0.994 / 0.021; benchmarks/encode_speed.py prints the full-set numbers). The margin covers
  batch composition, which moves int8 vectors slightly because activations get one quantisation scale per batch.
  The tiny models (random weights, no outlier channels) quantise almost exactly (max abs ~1e-4).
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

import mlse.encoders.onnx.export as onnx_export
from mlse.cli.main import main
from mlse.encoders.identity import BACKENDS, backend_of, weights_identity
from mlse.encoders.load import load_encoder
from mlse.encoders.onnx.runtime import OnnxEncoder, plan_batches
from mlse.encoders.threads import default_threads
from mlse.errors import MlseError
from mlse.models import load_model

FP32_TOL = 1e-4
INT8_MIN_COS, INT8_MEAN_COS, INT8_MAX_ABS = 0.97, 0.994, 0.05


def _sentences(data_dir, n: int = 40) -> list[str]:
    from mlse.data import load_sts

    texts = []
    for pair in ("en-en", "de-zh", "fr-ru"):
        ds = load_sts(pair, "test", data_dir)
        texts += [*ds.s1[: n // 2], *ds.s2[: n // 2]]
    long = " ".join(texts[:30])  # far beyond max_seq_length 64 of the tiny models: truncation must agree
    return [*texts, long, "", "  padded with spaces  "]


def _export_counter(monkeypatch) -> dict[str, int]:
    """Count real exports and quantisations (the functions still run)."""
    calls = {"fp32": 0, "int8": 0}
    export, quantize = onnx_export.export_fp32, onnx_export.quantize_int8

    def counted_export(*args, **kwargs):
        calls["fp32"] += 1
        return export(*args, **kwargs)

    def counted_quantize(*args, **kwargs):
        calls["int8"] += 1
        return quantize(*args, **kwargs)

    monkeypatch.setattr(onnx_export, "export_fp32", counted_export)
    monkeypatch.setattr(onnx_export, "quantize_int8", counted_quantize)
    return calls


def _agreement(a: np.ndarray, b: np.ndarray) -> tuple[float, np.ndarray]:
    assert a.shape == b.shape and a.dtype == np.float32 == b.dtype
    return float(np.abs(a - b).max()), (a * b).sum(1)


# -- agreement with torch on the tiny models ------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["tiny_bert", "tiny_xlmr", "tiny_labse"])
def test_fp32_matches_torch_on_tiny_models(request, model, data_dir):
    """BERT/WordPiece with token types, XLM-R/SentencePiece (pad id 1, no token types), CLS + Dense + Normalize."""
    path = str(request.getfixturevalue(model))
    texts = _sentences(data_dir)
    ref = load_encoder(path, cache=False).encode(texts)  # [n, d]
    enc = load_encoder(path, backend="onnx", cache=False)
    got = enc.encode(texts)
    max_abs, cos = _agreement(got, ref)
    assert max_abs <= FP32_TOL, max_abs
    raw = enc.encode(texts, normalize=False)  # unnormalised outputs agree too (teacher targets use them)
    ref_raw = load_encoder(path, cache=False).encode(texts, normalize=False)
    np.testing.assert_allclose(raw, ref_raw, rtol=1e-4, atol=1e-4 * float(np.abs(ref_raw).max()))
    # fp32 does not depend on which texts share a batch
    np.testing.assert_allclose(enc.encode(texts[3:4]), got[3:4], atol=1e-5)
    assert enc.encode([]).shape == (0, ref.shape[1])


def test_int8_close_to_torch_on_tiny_bert(tiny_bert, data_dir):
    texts = _sentences(data_dir)
    ref = load_encoder(str(tiny_bert), cache=False).encode(texts)
    got = load_encoder(str(tiny_bert), backend="onnx-int8", cache=False).encode(texts)
    max_abs, cos = _agreement(got, ref)
    assert cos.min() >= INT8_MIN_COS and cos.mean() >= INT8_MEAN_COS and max_abs <= INT8_MAX_ABS, (cos.min(), max_abs)
    assert max_abs > 1e-6  # it really is the quantised graph, not the fp32 one


def test_threads_and_parallel_modes_give_the_same_fp32_vectors(tiny_bert, data_dir):
    texts = _sentences(data_dir)
    one = load_encoder(str(tiny_bert), backend="onnx", cache=False, threads=1).encode(texts, batch_size=8)
    two = load_encoder(str(tiny_bert), backend="onnx", cache=False, threads=2).encode(texts, batch_size=8)
    intra = load_encoder(str(tiny_bert), backend="onnx", cache=False, threads=2, parallel="intra").encode(texts)
    np.testing.assert_allclose(one, two, atol=1e-5)
    np.testing.assert_allclose(one, intra, atol=1e-5)


def test_smoothing_keeps_the_fp32_function_and_reaches_every_layernorm_fed_matmul(tiny_bert):
    import onnx
    import onnxruntime as ort

    from mlse.encoders.onnx.quantize import SMOOTH_ROLES, activation_stats, smooth_matmuls

    enc = load_encoder(str(tiny_bert), backend="onnx", cache=False)
    enc.encode(["x"])  # loads the session and tokenizer
    fp32 = enc.export_dir
    meta = json.loads((fp32 / onnx_export.META_FILE).read_text())
    model = onnx.load(str(fp32 / onnx_export.MODEL_FILE))
    groups = smooth_matmuls(  # every LayerNorm-fed group: Q/K/V and the first feed-forward
        model,
        lambda names: {
            name: s["absmax"]
            for name, s in activation_stats(
                fp32 / onnx_export.MODEL_FILE,
                fp32 / onnx_export.TOKENIZER_FILE,
                meta["inputs"],
                meta["pad_token_id"],
                names,
                table=np.load(fp32 / meta["embedding_table"]),
            ).items()
        },
        roles=SMOOTH_ROLES,
    )
    assert groups == 4  # 2 layers x (Q/K/V, first feed-forward)
    muls = [n for n in model.graph.node if n.name.startswith("mlse_smooth_")]
    assert len(muls) == 4
    feed = enc._feed(enc._tokenizer.encode_ids(["a test sentence", "and another, longer one"]), np.arange(2))
    before = ort.InferenceSession(str(fp32 / onnx_export.MODEL_FILE)).run(None, feed)[0]  # [2, d]
    after = ort.InferenceSession(model.SerializeToString()).run(None, feed)[0]
    np.testing.assert_allclose(after, before, atol=1e-5)


# -- the export cache -----------------------------------------------------------------------------------------------


def test_export_is_cached_and_reused(tiny_bert, monkeypatch):
    calls = _export_counter(monkeypatch)
    first = load_encoder(str(tiny_bert), backend="onnx-int8", cache=False)
    v1 = first.encode(["a first sentence"])
    assert calls == {"fp32": 1, "int8": 1}  # int8 is quantised from the fp32 export, which is kept as well
    folder = first.export_dir
    assert folder.name.startswith("int8-") and onnx_export.is_complete(folder)
    assert onnx_export.is_complete(folder.parent / "fp32")
    mtime = (folder / onnx_export.MODEL_FILE).stat().st_mtime_ns

    again = load_encoder(str(tiny_bert), backend="onnx-int8", cache=False)  # a new encoder, as in a new process
    np.testing.assert_array_equal(again.encode(["a first sentence"]), v1)
    load_encoder(str(tiny_bert), backend="onnx", cache=False).encode(["x"])
    assert calls == {"fp32": 1, "int8": 1}
    assert (folder / onnx_export.MODEL_FILE).stat().st_mtime_ns == mtime
    meta = json.loads((folder / onnx_export.META_FILE).read_text())
    assert meta["variant"] == "int8" and meta["max_seq_length"] == 64 and meta["quantization"]["per_channel"]
    assert meta["smoothed_groups"] == 4  # SmoothQuant reached Q/K/V and the first feed-forward MatMul of both layers
    assert not [p for p in folder.parent.iterdir() if p.name.endswith(".tmp")]  # no temporary folders left


def test_half_written_export_is_never_used(tiny_bert, monkeypatch):
    calls = _export_counter(monkeypatch)
    enc = load_encoder(str(tiny_bert), backend="onnx", cache=False)
    good = enc.encode(["hello there"])
    folder = enc.export_dir
    (folder / onnx_export.META_FILE).unlink()  # as if a writer died before finishing (pre-rename layouts)
    (folder / onnx_export.MODEL_FILE).write_bytes(b"truncated")
    np.testing.assert_allclose(
        load_encoder(str(tiny_bert), backend="onnx", cache=False).encode(["hello there"]), good, atol=1e-6
    )
    assert calls["fp32"] == 2 and onnx_export.is_complete(folder)


def test_failed_export_leaves_nothing_behind(tiny_bert, monkeypatch):
    def boom(model_dir, out):
        (out / onnx_export.MODEL_FILE).write_bytes(b"partial")
        raise RuntimeError("killed mid-export")

    monkeypatch.setattr(onnx_export, "export_fp32", boom)
    enc = load_encoder(str(tiny_bert), backend="onnx", cache=False)
    with pytest.raises(RuntimeError, match="mid-export"):
        enc.encode(["x"])
    root = onnx_export.export_root()
    leftovers = [p.name for p in root.rglob("*") if p.is_dir()]
    assert all(not name.startswith(("fp32", ".fp32")) for name in leftovers), leftovers


# -- identities and the embedding cache -----------------------------------------------------------------------------


def test_identity_names_the_backend_and_keeps_the_caches_apart(tiny_bert, monkeypatch):
    encs = {b: load_encoder(str(tiny_bert), backend=b) for b in BACKENDS}
    ids = {b: e.identity for b, e in encs.items()}
    assert len(set(ids.values())) == 3
    assert {weights_identity(i) for i in ids.values()} == {ids["torch"]}  # same weights
    assert {b: backend_of(i) for b, i in ids.items()} == {b: b for b in BACKENDS}
    stores = {e.store(True).path for e in encs.values()}
    assert len(stores) == 3
    vecs = {b: e.encode(["one sentence", "another one"]) for b, e in encs.items()}
    assert all(e.stats["encoded"] == 2 for e in encs.values())  # nothing served across backends
    assert not np.array_equal(vecs["onnx-int8"], vecs["torch"])
    again = load_encoder(str(tiny_bert), backend="onnx-int8")
    np.testing.assert_array_equal(again.encode(["one sentence", "another one"]), vecs["onnx-int8"])
    assert again.stats == {"encoded": 0, "served": 2}
    # the max_seq_length override is part of the identity, as for torch
    short = load_encoder(str(tiny_bert), backend="onnx", max_seq_length=8, cache=False)
    assert short.identity != ids["onnx"] and "@8" in short.identity
    # another quantisation recipe is another identity and another export folder: nothing stale is ever served
    int8_dir = encs["onnx-int8"].inner.export_dir
    monkeypatch.setitem(onnx_export.INT8_RECIPE, "smooth_alpha", 0.6)
    other = load_encoder(str(tiny_bert), backend="onnx-int8", cache=False)
    assert other.identity != ids["onnx-int8"] and backend_of(other.identity) == "onnx-int8"
    assert other.export_dir != int8_dir and other.identity.split("|backend=")[1].startswith("onnx-int8-v")


# -- errors ---------------------------------------------------------------------------------------------------------


def test_unknown_backend_is_a_clear_error(tiny_bert):
    with pytest.raises(MlseError, match=r"unknown backend 'tensorrt'.*torch, onnx, onnx-int8"):
        load_encoder(str(tiny_bert), backend="tensorrt")


def test_missing_onnxruntime_is_a_clear_error(tiny_bert, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now raises ImportError
    with pytest.raises(MlseError, match="pip install onnxruntime"):
        load_encoder(str(tiny_bert), backend="onnx-int8")


def test_onnx_refuses_a_gpu_device(tiny_bert):
    with pytest.raises(MlseError, match="CPU only"):
        load_encoder(str(tiny_bert), backend="onnx", device="cuda")


def test_threads_env(monkeypatch):
    monkeypatch.delenv("MLSE_THREADS", raising=False)
    assert default_threads() == 2
    monkeypatch.setenv("MLSE_THREADS", "3")
    assert default_threads() == 3
    monkeypatch.setenv("MLSE_THREADS", "zero")
    with pytest.raises(MlseError, match="MLSE_THREADS"):
        default_threads()


# -- batch planning -------------------------------------------------------------------------------------------------


def test_plan_batches_sorts_by_length_and_respects_the_token_budget():
    rng = np.random.default_rng(0)
    lengths = np.concatenate([rng.integers(9, 120, size=300), np.full(200, 8)])[rng.permutation(500)]
    batches = plan_batches(lengths, batch_size=64, workers=2, max_tokens=512)
    rows = np.concatenate(batches)
    assert sorted(rows.tolist()) == list(range(500))  # every text exactly once
    assert np.all(np.diff(lengths[rows]) <= 0)  # longest first
    for b in batches:
        assert len(b) <= 64 and (len(b) == 1 or len(b) * lengths[b].max() <= 512)
    assert max(len(b) for b in batches) == 64  # short texts fill whole batches (512 // 8 = 64)
    assert [len(b) for b in plan_batches(np.full(5, 10), 64, workers=2, max_tokens=512)] == [3, 2]  # both cores busy
    assert [len(b) for b in plan_batches(np.full(5, 10), 2, workers=1, max_tokens=None)] == [2, 2, 1]
    assert plan_batches(np.array([500]), 64, workers=2, max_tokens=100)[0].tolist() == [0]  # longer than budget
    assert plan_batches(np.array([], dtype=int), 64) == []


# -- CLI and scorers ------------------------------------------------------------------------------------------------


def test_cli_eval_backend_reaches_the_encoder(capsys, tmp_path, tiny_bert):
    tsv = tmp_path / "mine.tsv"
    tsv.write_text(
        "A man plays a flute.\tA man is playing the flute.\t4.6\nA dog runs.\tThe market fell.\t0.2\n"
        "Kids play football.\tChildren are playing soccer.\t4.1\n",
        encoding="utf-8",
    )
    results = {}
    for backend in BACKENDS:
        out = tmp_path / f"{backend}.json"
        code = main(
            [
                "eval",
                "--task",
                "sts",
                "--pairs-file",
                str(tsv),
                "--model",
                str(tiny_bert),
                "--backend",
                backend,
                "--json-out",
                str(out),
            ]
        )
        assert code == 0, capsys.readouterr().err
        results[backend] = json.loads(out.read_text())
    assert backend_of(results["onnx-int8"]["model_identity"]) == "onnx-int8"
    assert backend_of(results["onnx"]["model_identity"]) == "onnx"
    assert backend_of(results["torch"]["model_identity"]) == "torch"
    sp = {b: r["scores"]["mine"]["spearman"] for b, r in results.items()}
    assert sp["onnx"] == pytest.approx(sp["torch"], abs=1e-6)


def test_cli_backend_on_train_experiment_and_finetune(capsys, monkeypatch, tmp_path):
    seen = {}

    class Done(Exception):
        pass

    def capture(name):
        def fake(*args, **kwargs):
            seen[name] = kwargs.get("backend")
            raise Done

        return fake

    import mlse.cli.experiment as cli_experiment
    import mlse.train.head_training as heads

    monkeypatch.setattr(heads, "train_stage1", capture("stage1"))  # what `train stage1/2` runs (train_heads)
    monkeypatch.setattr(heads, "train_stage2", capture("stage2"))
    monkeypatch.setattr(cli_experiment, "run_seed_grid", capture("grid"))
    for argv in (
        ["train", "stage1", "--backend", "onnx-int8"],
        ["train", "stage2", "--stage1", "x", "--backend", "onnx"],
        ["experiment", "seed-grid", "--backend", "onnx-int8", "--out", str(tmp_path)],
    ):
        with pytest.raises(Done):
            main(argv)
    assert seen == {"stage1": "onnx-int8", "stage2": "onnx", "grid": "onnx-int8"}
    assert main(["finetune", "--method", "mse", "--backend", "onnx"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: finetune trains") and "eval --model RUN --backend onnx" in err
    with pytest.raises(SystemExit) as exc:
        main(["eval", "--task", "sts", "--backend", "tensorrt"])
    assert exc.value.code == 2 and "invalid choice: 'tensorrt'" in capsys.readouterr().err


def test_scorer_trained_on_onnx_backbone_loads_on_every_backend(tiny_bert, tmp_path, data_dir):
    from mlse.runs.folders import SCORER_FILE
    from mlse.train.head_training import train_stage1

    out = tmp_path / "tiny+s1"
    trained = train_stage1(
        str(tiny_bert),
        out=out,
        pairs=["eng-deu"],
        max_pairs=30,
        data_dir=data_dir,
        probe=False,
        max_epochs=2,
        backend="onnx",
    )
    manifest = json.loads((out / SCORER_FILE).read_text())
    torch_identity = load_encoder(str(tiny_bert), cache=False).identity
    assert manifest["backbone_identity"] == torch_identity and manifest["backbone_backend"] == "onnx"
    texts = _sentences(data_dir, 10)
    loaded = {b: load_model(str(out), backend=b) for b in BACKENDS}
    assert {b: backend_of(s.backbone.identity) for b, s in loaded.items()} == {b: b for b in BACKENDS}
    assert isinstance(loaded["onnx-int8"].backbone.inner, OnnxEncoder)
    vecs = {b: s.encode(texts) for b, s in loaded.items()}
    np.testing.assert_allclose(vecs["onnx"], vecs["torch"], atol=FP32_TOL)
    np.testing.assert_allclose(vecs["onnx"], trained.encode(texts), atol=1e-6)
    assert (vecs["onnx-int8"] * vecs["torch"]).sum(1).min() >= INT8_MIN_COS


# -- the real model -------------------------------------------------------------------------------------------------


@pytest.mark.multithread
def test_minilm_fp32_and_int8_against_torch(data_dir):
    """minilm-en on 400 STS en test sentences: fp32 within 1e-4, int8 within the bounds in the module docstring."""
    from mlse.data import load_sts

    ds = load_sts("en-en", "test", data_dir)
    texts = list(dict.fromkeys([*ds.s1, *ds.s2]))[:400]
    ref = load_encoder("minilm-en", cache=False).encode(texts)
    fp32 = load_encoder("minilm-en", backend="onnx", cache=False).encode(texts)
    int8 = load_encoder("minilm-en", backend="onnx-int8", cache=False).encode(texts)
    max_abs, _ = _agreement(fp32, ref)
    assert max_abs <= FP32_TOL, max_abs
    max_abs, cos = _agreement(int8, ref)
    assert cos.min() >= INT8_MIN_COS and cos.mean() >= INT8_MEAN_COS and max_abs <= INT8_MAX_ABS, (cos.min(), max_abs)
    assert os.environ["MLSE_CACHE"] in str(load_encoder("minilm-en", backend="onnx-int8", cache=False).export_dir)
