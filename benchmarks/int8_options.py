"""What each int8 quantisation option costs in accuracy and speed, and which MatMuls are the most sensitive.

    python -m benchmarks.int8_options [--model me5-small] [--threads 2] [--runs 5] [--out results/int8]
    python -m benchmarks.int8_options --quick --model <small model> --out <folder>   # the test suite's smoke run

1. **Sensitivity**: for every (role, layer) group of constant-weight MatMuls (roles from
   :mod:`mlse.encoders.onnx.int8_nodes`: qkv, attn_out, ffn_in, ffn_out), an int8 graph that quantises only that group
   (the recipe's smoothing included) is compared with the fp32 graph: 1 - mean cosine of the embeddings of STS Multi
   MT *dev* sentences in all ten languages (never the test sentences the accuracy is reported on). Groups are ranked by
   that damage; the "keep top-k in fp32" variants take the first k.
2. **Variants**: the current recipe, then one change at a time (per-tensor weights, SmoothQuant alpha, smoothing more
   roles, reduce_range, static QDQ calibration on the dev sentences, the most sensitive groups kept in fp32, the first
   and last layers kept in fp32). Each is built into ``--work`` (reused while its recipe is unchanged).
3. **Accuracy**: STS Multi MT test Spearman x 100 of en-en and the 12 cross-lingual pairs through
   :func:`mlse.evaluation.runners.run_sts` (the README's cross-12), the gap to the fp32 ONNX graph.
4. **Speed**: sentences/s on the first ``--sentences`` unique STS en test sentences, ``--threads`` workers, torch,
   fp32 ONNX and every variant taking turns within each of ``--runs`` runs (medians; ratios paired within a run, so
   that load from other processes hits all alike). CPU seconds per sentence are recorded as well: under load they move
   less than wall time.
5. **AVX2 saturation** (emulated): the share of int8 MatMul outputs for which an AVX2 u8 x s8 kernel (vpmaddubsw, int16
   pair sums) would saturate, on 40 dev sentences; this machine's VNNI kernels never saturate, and onnxruntime picks
   its kernels from CPUID with no switch to force the AVX2 ones, so AVX2 speed cannot be measured here at all.

The word-embedding lookup is outside every graph (mlse.encoders.rows reads fp32 rows), so "keep the Gather in fp32"
holds for every variant. Writes ``<out>/int8-options-<model>.{json,md}`` with the command, CPU name and ISA flags.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks._int8_options_avx2 import avx2_saturation
from benchmarks._int8_options_report import report
from benchmarks.common import QUICK_HELP, Quiet, cpu_name, isa_flags, make_encoder, onnx_versions, output_dir, renice
from mlse.atomic import atomic_dir, atomic_write_text
from mlse.data import load_sts
from mlse.data.pairs import CROSS_12
from mlse.dirs import cache_root
from mlse.encoders.onnx import export as onnx_export
from mlse.encoders.onnx.int8_nodes import ROLES, matmul_roles
from mlse.encoders.onnx.runtime import OnnxEncoder
from mlse.errors import MlseError
from mlse.models import load_model
from mlse.runs.results import library_versions

LANGS = ["en", "de", "es", "fr", "it", "nl", "pl", "pt", "ru", "zh"]  # the languages of en-en and cross-12
# The recipe before this benchmark (export folder int8-9ccc127a): every constant-weight MatMul quantised.
PREVIOUS = {
    "op_types_to_quantize": ["MatMul"],
    "per_channel": True,
    "reduce_range": False,
    "weight_type": "QInt8",
    "smooth_alpha": 0.5,
}
SKIP_LN_OFF = "default, session without SkipLayerNormFusion"
OUTLIERS = {"roles": ["ffn_out"], "min_ratio": 9.0, "max_share": 0.25}


class FolderEncoder(OnnxEncoder):
    """An ONNX encoder on a given export folder (a variant built here) instead of the cached export."""

    def __init__(self, spec, folder: Path, label: str, threads: int, disabled_optimizers: tuple[str, ...] = ()):
        super().__init__(spec, quantized=True, threads=threads)
        self.folder, self.name, self.disabled = Path(folder), label, list(disabled_optimizers)

    @property
    def export_dir(self) -> Path:
        return self.folder

    def _load(self) -> None:
        """As the library's, then (for a runtime option) the session again without the named graph optimisers."""
        fresh = self._session is None
        super()._load()
        if fresh and self.disabled:
            import onnxruntime as ort

            from mlse.encoders.threads import session_options

            so = session_options(self.threads if self.parallel == "intra" else 1)
            self._session = ort.InferenceSession(
                str(self.folder / onnx_export.MODEL_FILE),
                so,
                providers=["CPUExecutionProvider"],
                disabled_optimizers=self.disabled,
            )


def onnx_runtime(name: str, threads: int):
    """``name`` on its fp32 ONNX runtime, or a one-line :class:`MlseError` saying why it has none (muse runs a graph
    of its own, not an export of a transformer checkpoint: there is nothing here to quantise another way)."""
    encoder = load_model(name, backend="onnx", cache=False, threads=threads)
    if not hasattr(encoder, "export_dir"):  # a calibrated encoder answers for the runtime it wraps
        kind = type(getattr(encoder, "inner", encoder)).__name__
        raise MlseError(
            f"{name} has no ONNX export ({kind} runs a graph of its own): int8 options apply to transformer "
            "encoders exported to ONNX (me5-small, minilm-en, a Hugging Face model)"
        )
    return encoder


def dev_sentences(per_lang: int, langs: list[str]) -> list[str]:
    """Calibration / sensitivity text: the first ``per_lang`` unique dev sentences of each language (not test)."""
    out: list[str] = []
    for lang in langs:
        ds = load_sts(f"{lang}-{lang}", "dev")
        out += list(dict.fromkeys([*ds.s1, *ds.s2]))[:per_lang]
    return out


def build(fp32_dir: Path, work: Path, name: str, recipe: dict, texts: list[str] | None) -> Path:
    """The variant folder for ``recipe`` (calibrated on ``texts``, default the library's), built once per recipe."""
    key = json.dumps([recipe, onnx_export.INT8_VERSION, texts], sort_keys=True)
    folder = work / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"
    if not onnx_export.is_complete(folder):
        with atomic_dir(folder) as tmp:
            onnx_export.quantize_int8(fp32_dir, tmp, recipe, texts)
    return folder


def groups_of(fp32_dir: Path) -> list[str]:
    """Selectors of every (role, layer) group of the model, in graph order."""
    import onnx

    nodes = matmul_roles(onnx.load(str(fp32_dir / onnx_export.MODEL_FILE), load_external_data=False).graph)
    return list(dict.fromkeys(f"{n.role}@{n.layer}" if n.role != "other" else "other" for n in nodes))


def sensitivity(args, spec, fp32_dir: Path, texts: list[str]) -> list[dict]:
    """Damage (1 - mean cosine to fp32) of quantising one group at a time, and the outlier ratio of the group's input
    (mlse.encoders.onnx.quantize.activation_stats); most damaging first. Kept in ``--work`` for reruns."""
    groups = groups_of(fp32_dir)[: 2 if args.quick else None]
    key = json.dumps([PREVIOUS, onnx_export.INT8_VERSION, texts, groups], sort_keys=True)
    stored = args.work / f"sensitivity-{hashlib.sha256(key.encode()).hexdigest()[:8]}.json"
    if stored.is_file():
        return json.loads(stored.read_text())
    ref = FolderEncoder(spec, fp32_dir, "fp32", args.threads).encode(texts, show_progress=False)  # [n, d]
    ratios = group_ratios(fp32_dir, texts)
    rows = []
    for i, group in enumerate(groups):
        recipe = PREVIOUS | {"keep_fp32": [g for g in groups if g != group]}
        folder = build(fp32_dir, args.work, f"only-{group.replace('@', '-')}", recipe, None)
        vecs = FolderEncoder(spec, folder, group, args.threads).encode(texts, show_progress=False)
        cos = (vecs * ref).sum(1)  # [n]
        rows.append(
            {
                "group": group,
                "damage": float(1 - cos.mean()),
                "min_cos": float(cos.min()),
                "outlier_ratio": ratios.get(group),
            }
        )
        print(f"sensitivity {i + 1}/{len(groups)} {group}: 1 - mean cos {rows[-1]['damage']:.2e}", flush=True)
    whole = build(fp32_dir, args.work, "all", PREVIOUS, None)
    cos = (FolderEncoder(spec, whole, "all", args.threads).encode(texts, show_progress=False) * ref).sum(1)
    rows.append({"group": "all (previous recipe)", "damage": float(1 - cos.mean()), "min_cos": float(cos.min())})
    rows.sort(key=lambda r: -r["damage"])
    atomic_write_text(stored, json.dumps(rows, indent=1))
    return rows


def group_ratios(fp32_dir: Path, texts: list[str]) -> dict[str, float]:
    """Outlier ratio (largest / median per-token max |x|) of each group's input on ``texts``."""
    import onnx

    from mlse.encoders.onnx.quantize import activation_stats

    meta = json.loads((fp32_dir / onnx_export.META_FILE).read_text())
    graph = onnx.load(str(fp32_dir / onnx_export.MODEL_FILE), load_external_data=False).graph
    first_input = {n.name: n.input[0] for n in graph.node if n.op_type == "MatMul"}
    tensors = {}
    for node in matmul_roles(graph):
        tensors.setdefault(f"{node.role}@{node.layer}" if node.role != "other" else "other", first_input[node.name])
    table = np.load(fp32_dir / meta["embedding_table"], mmap_mode="r") if meta.get("embedding_table") else None
    stats = activation_stats(
        fp32_dir / onnx_export.MODEL_FILE,
        fp32_dir / onnx_export.TOKENIZER_FILE,
        meta["inputs"],
        meta["pad_token_id"],
        sorted(set(tensors.values())),
        [meta.get("text_prefix", "") + t for t in texts],
        table,
    )
    return {group: round(stats[t]["outlier_ratio"], 2) for group, t in tensors.items()}


def variants(ranking: list[dict], quick: bool) -> dict[str, dict]:
    """Recipe per option: the previous one, then one change at a time, and the library's default."""
    top = [r["group"] for r in ranking if "@" in r["group"]]
    out = {"previous recipe": PREVIOUS}
    if quick:
        return with_default(out)
    out |= {
        "per-tensor weights": PREVIOUS | {"per_channel": False},
        "no SmoothQuant": PREVIOUS | {"smooth_alpha": 0},
        "SmoothQuant alpha 0.3": PREVIOUS | {"smooth_alpha": 0.3},
        "SmoothQuant alpha 0.8": PREVIOUS | {"smooth_alpha": 0.8},
        "SmoothQuant also on ffn_out": PREVIOUS | {"smooth_roles": ["qkv", "ffn_in", "ffn_out"]},
        "reduce_range (7-bit weights)": PREVIOUS | {"reduce_range": True},
        "static QDQ, MinMax (dev calibration)": PREVIOUS | {"method": "static", "calibrate_method": "MinMax"},
        "static QDQ, Percentile (dev calibration)": PREVIOUS | {"method": "static", "calibrate_method": "Percentile"},
        "first + last layer fp32": PREVIOUS | {"keep_fp32": ["*@0", "*@-1"]},
        "all ffn_out fp32": PREVIOUS | {"keep_fp32": ["ffn_out"]},
    }
    for k in (1, 2, 3, 4):
        out[f"keep top-{k} sensitive fp32 ({', '.join(top[:k])})"] = PREVIOUS | {"keep_fp32": top[:k]}
    for ratio in (9.0, 12.0):  # the rule the library applies to any model (mlse.encoders.onnx.int8_nodes.outlier_nodes)
        rule = PREVIOUS | {"keep_outliers": OUTLIERS | {"min_ratio": ratio}}
        out[f"keep outlier ffn_out fp32 (ratio >= {ratio:g}, <= 1/4 of layers)"] = rule
        out[f"keep outlier ffn_out fp32 (ratio >= {ratio:g}) + reduce_range"] = rule | {"reduce_range": True}
    return with_default(out)


def with_default(options: dict[str, dict]) -> dict[str, dict]:
    """``options`` with the library's INT8_RECIPE marked (or added when it is none of them)."""
    named = {(f"{k} = default" if v == onnx_export.INT8_RECIPE else k): v for k, v in options.items()}
    return named if named != options else options | {"default (INT8_RECIPE)": onnx_export.INT8_RECIPE}


def accuracy(enc, pairs: list[str], batch_size: int) -> dict:
    from mlse.evaluation.runners import run_sts

    res = run_sts(Quiet(enc), pairs=pairs, batch_size=batch_size, n_boot=0)
    group = "cross-12" if "cross-12" in res.averages else "cross-lingual"
    return {
        "spearman": {p: round(s["spearman"], 2) for p, s in res.scores.items()},
        "group": group,
        "cross": round(res.averages[group]["spearman"], 3),
    }


def stored_accuracy(enc: FolderEncoder, pairs: list[str], batch_size: int) -> dict:
    """:func:`accuracy`, kept beside the variant (the vectors of a graph on given texts do not change with load)."""
    key = hashlib.sha256(json.dumps([pairs, batch_size, *enc.disabled]).encode()).hexdigest()[:8]
    path = enc.folder / f"accuracy-{key}.json"
    if path.is_file():
        out = json.loads(path.read_text())
    else:
        out = accuracy(enc, pairs, batch_size)
        atomic_write_text(path, json.dumps(out))
    meta = json.loads((enc.folder / onnx_export.META_FILE).read_text())
    out["kept_fp32"] = len(meta.get("kept_fp32", [])) if meta.get("variant") == "int8" else None
    print(f"{enc.name}: {out['group']} {out['cross']:.2f}", flush=True)
    return out


def speed(encoders: dict, texts: list[str], runs: int, batch_size: int) -> dict:
    """Wall and CPU sentences/s per encoder (medians over interleaved runs) and ratios paired within each run."""
    for enc in encoders.values():
        enc.encode(texts[:32], batch_size=batch_size, show_progress=False)  # warm-up: sessions, allocators
    wall: dict[str, list[float]] = {k: [] for k in encoders}
    cpu: dict[str, list[float]] = {k: [] for k in encoders}
    for r in range(runs):
        for key, enc in encoders.items():
            w0, c0 = time.perf_counter(), time.process_time()
            enc.encode(texts, batch_size=batch_size, show_progress=False)
            wall[key].append(len(texts) / (time.perf_counter() - w0))
            cpu[key].append(len(texts) / (time.process_time() - c0))
        print(f"speed run {r + 1}/{runs}: " + ", ".join(f"{k[:24]} {v[-1]:.0f}" for k, v in wall.items()), flush=True)

    def paired(key: str, ref: str, table: dict) -> float:
        return round(float(np.median(np.array(table[key]) / np.array(table[ref]))), 3)

    return {
        k: {
            "sentences_per_s": round(float(np.median(wall[k])), 1),
            "runs": [round(x, 1) for x in wall[k]],
            "vs_torch": paired(k, "torch", wall),
            "vs_fp32": paired(k, "fp32 ONNX", wall),
            "cpu_sentences_per_s": round(float(np.median(cpu[k])), 1),
            "cpu_vs_fp32": paired(k, "fp32 ONNX", cpu),
        }
        for k in encoders
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.int8_options", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="me5-small")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--sentences", type=int, default=1000, help="STS en test sentences to time")
    parser.add_argument("--dev-per-lang", type=int, default=40, help="dev sentences per language (sensitivity)")
    parser.add_argument("--calib-per-lang", type=int, default=10, help="dev sentences per language (static)")
    parser.add_argument("--only", help="comma-separated option names to evaluate (default: all)")
    parser.add_argument("--work", type=Path, help="where variants are built (default: the cache)")
    parser.add_argument("--out", type=Path, help="default results/int8 (a temporary folder with --quick)")
    parser.add_argument("--quick", action="store_true", help=f"2 groups, 2 variants, 20 sentences: {QUICK_HELP}")
    args = parser.parse_args(argv)
    if args.quick:
        args.sentences, args.dev_per_lang, args.calib_per_lang, args.runs = 20, 2, 2, 1
    started = time.perf_counter()
    fp32_enc = onnx_runtime(args.model, args.threads)  # a model without an ONNX export is refused before any writing
    args.out = output_dir(args.out, args.quick, "results/int8", "int8-options")
    command = " ".join(["python -m benchmarks.int8_options", *(argv if argv is not None else sys.argv[1:])])
    fp32_dir = fp32_enc.export_dir  # exports (or finds) the fp32 graph
    spec = fp32_enc.spec
    args.work = args.work or cache_root() / "int8-options" / fp32_dir.parent.name
    args.work.mkdir(parents=True, exist_ok=True)
    dev = dev_sentences(args.dev_per_lang, LANGS)
    ranking = sensitivity(args, spec, fp32_dir, dev)
    calib = dev_sentences(args.calib_per_lang, LANGS)
    options = variants(ranking, args.quick)
    if args.only:
        options = {k: v for k, v in options.items() if any(k.startswith(o) for o in args.only.split(","))}
    encoders = {"fp32 ONNX": FolderEncoder(spec, fp32_dir, "fp32 ONNX", args.threads)}
    for name, recipe in options.items():
        texts = calib if recipe.get("method") == "static" else None
        encoders[name] = FolderEncoder(spec, build(fp32_dir, args.work, "v", recipe, texts), name, args.threads)
    # A runtime option rather than a recipe: onnxruntime's fused SkipLayerNormalization kernel is a scalar loop, slower
    # than the Add + vectorised LayerNormalization it replaces (the fusion happens only in the int8 graphs).
    default = build(fp32_dir, args.work, "v", onnx_export.INT8_RECIPE, None)
    encoders[SKIP_LN_OFF] = FolderEncoder(spec, default, SKIP_LN_OFF, args.threads, ("SkipLayerNormFusion",))
    pairs = ["en-de"] if args.quick else ["en-en", *CROSS_12]
    acc = {name: stored_accuracy(enc, pairs, args.batch_size) for name, enc in encoders.items()}
    avx2 = {name: avx2_saturation(enc.folder, dev[:: max(1, len(dev) // 40)]) for name, enc in encoders.items()}
    ds = load_sts("en-en", "test")
    texts = list(dict.fromkeys([*ds.s1, *ds.s2]))[: args.sentences]
    timed = {"torch": make_encoder(args.model, "torch", args.threads)} | encoders
    reniced = renice()  # only for the timing: the long accuracy runs leave other processes their share
    result = {
        "benchmark": "int8-options",
        "model": args.model,
        "command": command,
        "threads": args.threads,
        "runs": args.runs,
        "n_sentences": len(texts),
        "n_dev": len(dev),
        "reniced": reniced,
        "quick": args.quick,
        "load_start": list(os.getloadavg()),
        "cpu": cpu_name(),
        "isa": isa_flags(),
        "versions": library_versions() | onnx_versions(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "roles": list(ROLES),
        "sensitivity": ranking,
        "recipes": {k: v for k, v in options.items()},
        "accuracy": acc,
        "avx2_saturation": avx2,
        "speed": speed(timed, texts, args.runs, args.batch_size),
    }
    result["load_end"], result["total_s"] = list(os.getloadavg()), round(time.perf_counter() - started, 1)
    stem = f"int8-options-{Path(args.model).name}"
    atomic_write_text(args.out / f"{stem}.json", json.dumps(result, indent=1) + "\n")
    atomic_write_text(args.out / f"{stem}.md", report(result))
    print(report(result))
    print(f"wrote {args.out / stem}.{{json,md}} ({result['total_s']:.0f} s)")


if __name__ == "__main__":
    main()
