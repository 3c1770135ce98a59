"""Export a sentence-transformers model to ONNX once, quantise it to int8, and keep both on disk.

The graph is the whole pipeline (transformer, pooling, any Dense/Normalize) after the word-embedding lookup, with
dynamic batch and sequence axes: ``(inputs_embeds [B, T, H], attention_mask[, token_type_ids] [B, T]) ->
sentence_embedding [B, d]``; ``encode(normalize=True)`` normalises in numpy, so one graph serves both settings. The
runtime reads the table rows its tokens need from ``word_embeddings.npy`` (:mod:`mlse.encoders.rows`), so the table is
never resident; a model whose first module is not a transformers model taking ``inputs_embeds`` keeps ``input_ids``.

Layout, keyed by the weight fingerprint and the recipe (a changed recipe gets a new folder, never a stale graph)::

    <cache root>/onnx/<model>-<fingerprint[:16]>-v<EXPORT_VERSION>/
        fp32/                 model.onnx  word_embeddings.npy  tokenizer.json  export.json
        int8-<recipe hash>/   model.onnx  word_embeddings.npy (a hard link to fp32's)  tokenizer.json  export.json

Each variant folder is built in a hidden temporary sibling and renamed into place under a file lock, so a reader
never sees a half-written export. torch, onnx and onnxruntime.quantization are imported only when an export runs.
See docs/speed.md.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import shutil
import time
import warnings
from pathlib import Path

import numpy as np

from mlse.atomic import build_once
from mlse.dirs import cache_root, file_safe
from mlse.encoders.identity import text_prefix
from mlse.encoders.onnx.quantize import CALIBRATION_TEXTS, quantize_graph
from mlse.encoders.rows import word_embedding
from mlse.errors import MlseError

log = logging.getLogger(__name__)

# Bump EXPORT_VERSION when the export code changes (old folders and their cached embeddings are then ignored), and
# INT8_VERSION when the quantisation code changes (int8 graphs only). INT8_RECIPE is hashed into the identity.
EXPORT_VERSION = 3
INT8_VERSION = 2
OPSET = 17  # the first opset with LayerNormalization as one op
VARIANTS = ("fp32", "int8")
MODEL_FILE = "model.onnx"
# The word-embedding table [V, H] float32, whose rows the runtime reads as tokens need them (mlse.encoders.rows).
TABLE_FILE = "word_embeddings.npy"
TOKENIZER_FILE = "tokenizer.json"
META_FILE = "export.json"
# Tokeniser outputs a BERT/XLM-R style graph may take, in the order the wrapper's forward() receives them.
_INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
# Dynamic int8 recipe, chosen with benchmarks/int8_options.py: per-channel weight scales, SmoothQuant rescaling of
# the LayerNorm-fed MatMuls (mlse.encoders.onnx.quantize), only constant-weight MatMuls quantised. keep_outliers:
# second feed-forward MatMuls whose input has outlier tokens (largest per-token max |x| >= 9x the median one; at most
# a quarter of the layers) stay fp32. reduce_range (7-bit weights): an AVX2 CPU's u8 x s8 kernel adds pairs of
# products in int16, which 8-bit weights can overflow; with 7 bits no pair can, so accuracy is the same on every CPU.
INT8_RECIPE = {
    "op_types_to_quantize": ["MatMul"],
    "per_channel": True,
    "reduce_range": True,
    "weight_type": "QInt8",
    "smooth_alpha": 0.5,
    "keep_outliers": {"roles": ["ffn_out"], "min_ratio": 9.0, "max_share": 0.25},
}


def require(module: str, message: str):
    """``module``, imported on first use (torch and onnxruntime cost seconds and hundreds of MB), or MlseError with
    ``message`` when it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MlseError(message) from None


def export_root() -> Path:
    return cache_root() / "onnx"


def variant_tag(variant: str) -> str:
    """Names the exact recipe of a variant: in its folder name and in the encoder identity (hence the embedding cache).
    ``v3`` for fp32; ``v3.<hash of INT8_RECIPE and INT8_VERSION>`` for int8, so a changed recipe is never served stale.
    """
    if variant == "fp32":
        return f"v{EXPORT_VERSION}"
    recipe = hashlib.sha256(json.dumps([INT8_RECIPE, INT8_VERSION], sort_keys=True).encode()).hexdigest()[:8]
    return f"v{EXPORT_VERSION}.{recipe}"


def variant_dirname(variant: str) -> str:
    return "fp32" if variant == "fp32" else f"int8-{variant_tag(variant).split('.', 1)[1]}"


def export_folder(model_name: str, fingerprint: str) -> Path:
    """Where the exports of one model (by weight fingerprint) live; the variants are subfolders."""
    return export_root() / f"{file_safe(model_name)}-{fingerprint[:16]}-v{EXPORT_VERSION}"


def is_complete(variant_dir: Path) -> bool:
    return all((variant_dir / f).is_file() for f in (MODEL_FILE, TOKENIZER_FILE, META_FILE))


def ensure_export(model_dir: Path, model_name: str, fingerprint: str, variant: str) -> Path:
    """The folder holding ``variant`` ("fp32" or "int8") of the model at ``model_dir``, exporting it if missing."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown ONNX variant {variant!r}; expected one of {VARIANTS}")

    def build(tmp: Path) -> None:
        if variant == "fp32":
            export_fp32(model_dir, tmp)
        else:
            quantize_int8(ensure_export(model_dir, model_name, fingerprint, "fp32"), tmp)

    return build_once(export_folder(model_name, fingerprint) / variant_dirname(variant), is_complete, build)


# -- fp32: torch.onnx export -----------------------------------------------------------------------------------------
def export_fp32(model_dir: Path, out: Path) -> None:
    """Trace the sentence-transformers model at ``model_dir`` into ``out/model.onnx``, plus tokenizer and metadata."""
    torch = require("torch", "exporting a model to ONNX needs torch (pip install torch)")
    require("onnx", "exporting a model to ONNX needs the onnx package (pip install onnx)")  # torch.onnx writes with it
    from sentence_transformers import SentenceTransformer  # lazy, like torch above: only an export needs it
    from tokenizers import Tokenizer  # lazy: only tokenising needs it

    started = time.perf_counter()
    # Eager attention traces into plain MatMul/Softmax, which onnxruntime's optimiser fuses and its quantiser handles;
    # the SDPA path adds NaN guards (IsNaN/Where) that it does not.
    try:
        st = SentenceTransformer(
            str(model_dir),
            device="cpu",
            local_files_only=True,
            trust_remote_code=False,
            model_kwargs={"attn_implementation": "eager"},
        )
    except (OSError, ValueError) as exc:
        raise MlseError(f"could not load {model_dir} for ONNX export: {exc}") from None
    st.eval()
    tokenizer = st.tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise MlseError(f"{model_dir}: the ONNX backends need a fast (Rust) tokenizer; this model has none")
    sample = tokenizer(["a short one", "a somewhat longer sentence for tracing"], padding=True, return_tensors="pt")
    names = [n for n in _INPUT_NAMES if n in sample]
    table = word_embedding_table(st)
    if table is not None:  # the graph starts from the looked-up rows; the table is a file beside it
        np.save(out / TABLE_FILE, table.detach().cpu().numpy().astype(np.float32, copy=False))
        sample["inputs_embeds"] = table.detach()[sample["input_ids"]]  # [2, T, H]
        names = ["inputs_embeds", *(n for n in names if n != "input_ids")]
    wrapper = _pipeline_class()(st, names).eval()
    dynamic = {n: {0: "batch", 1: "tokens"} for n in names} | {"sentence_embedding": {0: "batch"}}
    try:
        trace_to_onnx(wrapper, tuple(sample[n] for n in names), out / MODEL_FILE, names, "sentence_embedding", dynamic)
    except Exception as exc:  # an architecture the tracer cannot handle: say which model, keep the cause
        raise MlseError(
            f"could not export {model_dir} to ONNX ({type(exc).__name__}: {exc}); use --backend torch for this model"
        ) from exc
    # the Rust tokenizer stored with truncation and padding switched off: the encoder sets both per call
    tok = Tokenizer.from_str(backend.to_str())
    tok.no_truncation()
    tok.no_padding()
    (out / TOKENIZER_FILE).write_text(tok.to_str())
    meta = {
        "format": "mlse-onnx/1",
        "export_version": EXPORT_VERSION,
        "variant": "fp32",
        "source": str(model_dir),
        "inputs": names,
        "embedding_table": TABLE_FILE if table is not None else None,
        "dim": int(st.get_embedding_dimension()),
        "max_seq_length": _max_seq_length(st),
        "pad_token_id": int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0),
        "text_prefix": text_prefix(model_dir),  # what the encoder puts before every text (int8 calibration too)
        "normalized_in_graph": any(type(m).__name__ == "Normalize" for m in st),
        "modules": [type(m).__name__ for m in st],
        "opset": OPSET,
        "torch": torch.__version__,
        "export_s": round(time.perf_counter() - started, 2),
    }
    (out / META_FILE).write_text(json.dumps(meta, indent=1))
    log.info("exported %s to ONNX in %.1fs", model_dir, meta["export_s"])


def word_embedding_table(st):
    """The word-embedding weight [V, H] of a sentence-transformers model whose first module is a transformers model
    that accepts ``inputs_embeds``, else None (the graph then takes token ids and holds the table itself)."""
    model, embedding = word_embedding(st)
    weight = getattr(embedding, "weight", None)
    forward = getattr(model, "forward", None)
    if weight is None or weight.dim() != 2 or forward is None:
        return None
    import inspect

    return weight if "inputs_embeds" in inspect.signature(forward).parameters else None


def trace_to_onnx(module, sample: tuple, path: Path, names: list[str], output: str, dynamic: dict) -> None:
    """Trace the torch ``module`` on the inputs ``sample`` (named ``names``) into the ONNX graph file ``path`` with one
    output ``output``, at :data:`OPSET` with the axes ``dynamic`` free: the setting every ONNX graph of mlse shares."""
    import torch  # lazy: torch costs seconds to import; only an export needs it

    with torch.no_grad(), warnings.catch_warnings():
        # The TorchScript exporter warns about itself (deprecated) and about shape checks it freezes; the frozen checks
        # compare the mask's length with the sequence length, which are equal for every input we feed.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            sample,
            str(path),
            input_names=names,
            output_names=[output],
            dynamic_axes=dynamic,
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )


def _pipeline_class():
    """The wrapper module, defined on first export so that importing this file needs no torch."""
    import torch  # lazy: torch costs seconds to import; only computing needs it

    class Pipeline(torch.nn.Module):
        """Positional tensors -> the sentence-transformers feature dict -> ``sentence_embedding`` [B, d].

        With ``inputs_embeds`` [B, T, H] the transformer is called directly, then the other modules."""

        def __init__(self, st, names: list[str]):
            super().__init__()
            self.st = st
            self.names = names

        def forward(self, *tensors):  # each [B, T] int64, or [B, T, H] float32 for inputs_embeds
            features = dict(zip(self.names, tensors))
            if "inputs_embeds" not in features:
                return self.st(features)["sentence_embedding"]  # [B, d]
            model, _ = word_embedding(self.st)  # the transformers model inside the first module
            out = model(**features, return_dict=True)
            features = {"attention_mask": features["attention_mask"], "token_embeddings": out.last_hidden_state}
            for module in list(self.st)[1:]:
                features = module(features)
            return features["sentence_embedding"]  # [B, d]

    return Pipeline


def _max_seq_length(st) -> int:
    """The model's own limit as sentence-transformers applies it, else what its position embeddings allow."""
    if st.max_seq_length:
        return int(st.max_seq_length)
    limit = getattr(st.tokenizer, "model_max_length", None)
    if limit and limit < 100_000:
        return int(limit)
    return 512


# -- int8: quantisation (mlse.encoders.onnx.quantize) ---------------------------------------------------------------
def quantize_int8(fp32_dir: Path, out: Path, recipe: dict | None = None, texts: list[str] | None = None) -> None:
    """Int8 graph from the fp32 export, following ``recipe`` (default INT8_RECIPE): SmoothQuant rescaling, then
    quantisation (:mod:`mlse.encoders.onnx.quantize`). ``texts``: calibration text (default CALIBRATION_TEXTS; the
    model's prefix is added either way)."""
    require("onnxruntime.quantization", "the onnx-int8 backend needs onnxruntime (pip install onnxruntime)")
    recipe = INT8_RECIPE if recipe is None else recipe
    started = time.perf_counter()
    meta = json.loads((fp32_dir / META_FILE).read_text())
    # Calibrate on the texts the model will see: with its prefix ("" for most models).
    texts = [meta.get("text_prefix", "") + t for t in (CALIBRATION_TEXTS if texts is None else texts)]
    done = quantize_graph(fp32_dir, out / MODEL_FILE, meta, recipe, texts)
    shutil.copyfile(fp32_dir / TOKENIZER_FILE, out / TOKENIZER_FILE)
    if meta.get("embedding_table"):  # the same rows: a second name for the fp32 file where the disk allows it
        table = (fp32_dir / meta["embedding_table"], out / meta["embedding_table"])
        try:
            os.link(*table)
        except OSError:  # another file system, or links not allowed
            shutil.copyfile(*table)
    meta.update(
        variant="int8",
        quantization=recipe,
        int8_version=INT8_VERSION,
        **done,
        quantize_s=round(time.perf_counter() - started, 2),
    )
    (out / META_FILE).write_text(json.dumps(meta, indent=1))
