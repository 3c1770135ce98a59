"""Speed and convergence of token-pair attributions (``mlse.explain``) per backbone x layer x steps.

    OMP_NUM_THREADS=2 python -m benchmarks.explain_speed [--models me5-small,minilm-en] [--pairs 20]
        [--convergence-pairs 200] [--steps 4,8,16] [--out results/explain] [--quick]

- **Pairs**: cross-lingual STS Multi MT *test* pairs (sentence 1 in one language, sentence 2 in another, the same
  row), the language pairs taken in turn from :data:`~benchmarks.common.EXPLAIN_LANG_PAIRS`, the rows drawn with a
  fixed seed (:func:`~benchmarks.common.cross_pairs`; ``benchmarks.explain_faithfulness`` uses the same sample).
- **Grid**: for every model, layer (0, half and three quarters of the depth; muse has only 0) and
  number of steps (``--steps``; muse ``--native-steps``): seconds per explanation (median and 90th percentile over
  ``--pairs`` pairs) and the relative residual |residual| / |score − reference terms| (median, maximum, share
  ≤ 2 %).
- **Headline**: one explanation of the flute pair lengthened to ~20 tokens a side, with the default settings (median
  of 5; ``--headline-only`` measures only this), and the alignment view on the same pair (median of 20); the memory
  an explanation adds (peak RSS over the loaded model, measured after resetting the peak) and what stays after it.
- **Convergence**: the share of ``--convergence-pairs`` pairs whose relative residual is ≤ 2 % with the defaults.
- **Machine**: CPU model, SIMD flags, torch threads, load average at start and end (the machine is shared: absolute
  times move with its load).

``--quick`` (what the test runs): 2 pairs per setting, 3 for convergence, steps 2 and 4, layers 0 and 1.
Defaults are :func:`mlse.explain.explain_pair`'s (layer, steps and rule per model). Writes
``<out>/<name>.json`` and ``.md`` (default name ``explain-speed``) atomically and prints the Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from benchmarks.common import EXPLAIN_LANG_PAIRS, EXPLAIN_TOLERANCE, cpu_name, cross_pairs, isa_flags
from mlse.atomic import atomic_write_text
from mlse.serving.procmem import memory_mb

LONG_PAIR = (
    "A man with a red hat is playing a silver flute on the street corner.",
    "Ein Mann mit rotem Hut spielt an der Ecke eine silberne Flöte.",
)  # ~20 tokens a side


# A study of the quadrature: float32 products throughout (bfloat16's rounding, the app's default where the CPU computes
# it natively, would floor the residuals; benchmarks/what_if_speed.py compares the two).
PRECISION = "float32"


def layers_for(n_layers: int, quick: bool) -> list[int]:
    if n_layers == 0:
        return [0]
    if quick:
        return [0, 1]
    return sorted({0, round(n_layers / 2), round(3 * n_layers / 4)})


def reset_peak() -> bool:
    """Reset this process's peak RSS (Linux: ``clear_refs`` 5), so the next peak is the next operation's."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def measure_setting(model, pairs, layer: int | None, steps: int | None) -> dict:
    """Seconds and relative residuals over ``pairs``; None: the model's default layer / steps (and rule)."""
    from mlse.explain import explain_pair

    seconds, rel, tokens = [], [], []
    for _, s1, s2 in pairs:
        e = explain_pair(model, s1, s2, steps=steps, layer=layer, precision=PRECISION)
        seconds.append(e.seconds)
        rel.append(e.relative_residual)
        tokens.append((len(e.tokens1) + len(e.tokens2)) / 2)
    return {
        "layer": e.layer,
        "steps": e.steps,
        "rule": e.rule,
        "pairs": len(pairs),
        "median_s": statistics.median(seconds),
        "p90_s": float(np.percentile(seconds, 90)),
        "median_rel_residual": statistics.median(rel),
        "max_rel_residual": max(rel),
        "share_within_2pct": float(np.mean(np.asarray(rel) <= EXPLAIN_TOLERANCE)),
        "mean_tokens": float(np.mean(tokens)),
    }


def headline(model, quick: bool) -> dict:
    from mlse.explain import align_tokens, explain_pair

    s1, s2 = LONG_PAIR
    explain_pair(model, s1, s2, steps=2, precision=PRECISION)  # warm up (first calls allocate)
    align_tokens(model, s1, s2)
    rss_before = memory_mb()["rss_mb"]
    peak_reset = reset_peak()
    runs = [explain_pair(model, s1, s2, precision=PRECISION) for _ in range(2 if quick else 5)]
    memory = memory_mb()
    aligns = [align_tokens(model, s1, s2).seconds for _ in range(3 if quick else 20)]
    e = runs[-1]
    return {
        "sentence1": s1,
        "sentence2": s2,
        "tokens1": len(e.tokens1),
        "tokens2": len(e.tokens2),
        "layer": e.layer,
        "steps": e.steps,
        "rule": e.rule,
        "explain_s": statistics.median(r.seconds for r in runs),
        "relative_residual": e.relative_residual,
        "align_s": statistics.median(aligns),
        "added_peak_mb": round(memory["peak_rss_mb"] - rss_before, 1) if peak_reset else None,
        "rss_after_minus_before_mb": round(memory["rss_mb"] - rss_before, 1),
        "top_pairs": [list(p) for p in e.top_pairs(5)],
    }


def measure_model(name: str, args) -> dict:
    import torch

    from mlse.explain import default_layer
    from mlse.explain.backbones import attributable
    from mlse.explain.explanation import DEFAULT_RULE, DEFAULT_STEPS
    from mlse.models import load_model

    torch.set_num_threads(args.threads)
    model = load_model(name)
    backbone = attributable(model)
    pairs = cross_pairs(args.pairs, data_dir=args.data_dir)
    result = {
        "model": name,
        "layers": backbone.n_layers if hasattr(backbone, "n_layers") else 0,
        "default_layer": default_layer(backbone),
        "default_steps": getattr(backbone, "default_steps", DEFAULT_STEPS),
        "default_rule": getattr(backbone, "default_rule", DEFAULT_RULE),
        "headline": headline(model, args.quick),
        "grid": [],
    }
    if args.headline_only:
        return result
    n_layers = getattr(backbone, "n_layers", 0)
    for layer in layers_for(n_layers, args.quick):
        for steps in args.steps if n_layers or args.quick else args.native_steps:
            row = measure_setting(model, pairs, layer, steps)
            result["grid"].append(row)
            print(
                f"{name} layer {layer} steps {steps}: {row['median_s']:.2f} s, residual "
                f"{row['median_rel_residual']:.2%} (within 2 %: {row['share_within_2pct']:.0%})",
                flush=True,
            )
    many = cross_pairs(args.convergence_pairs, data_dir=args.data_dir)
    result["convergence"] = measure_setting(model, many, None, None)
    return result


def markdown(results: dict) -> str:
    lines = [
        f"# Token-pair attributions: speed and convergence ({results['created']})",
        "",
        f"CPU {results['cpu']} ({', '.join(results['isa']) or 'no AVX2'}), {results['threads']} torch threads, "
        f"load average {results['load_start'][0]:.1f} at start, {results['load_end'][0]:.1f} at end. Pairs: "
        f"cross-lingual STS Multi MT test ({', '.join(EXPLAIN_LANG_PAIRS)}). Relative residual = |residual| / "
        "|score - reference terms|.",
        "",
    ]
    lines += [
        "| model | layer | steps | tokens/side (two ~20-token sentences) | explain s | residual | align s | "
        "added peak MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results["models"]:
        h = r["headline"]
        lines.append(
            f"| {r['model']} | {h['layer']} (default) | {h['steps']} (default) | {h['tokens1']}, "
            f"{h['tokens2']} | {h['explain_s']:.2f} | {h['relative_residual']:.2%} | {h['align_s']:.3f} | "
            f"{h['added_peak_mb']} |"
        )
    lines += [
        "",
        "Convergence with the defaults:",
        "",
        "| model | layer | steps | rule | pairs | within 2 % | median | max | median s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in (r for r in results["models"] if "convergence" in r):
        c = r["convergence"]
        lines.append(
            f"| {r['model']} | {c['layer']} | {c['steps']} | {c['rule']} | {c['pairs']} | "
            f"{c['share_within_2pct']:.1%} | {c['median_rel_residual']:.3%} | {c['max_rel_residual']:.2%} | "
            f"{c['median_s']:.2f} |"
        )
    lines += [
        "",
        "Grid (median over the pairs):",
        "",
        "| model | layer | steps | pairs | tokens/side | median s | p90 s | median residual | max residual | "
        "within 2 % |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["models"]:
        for g in r["grid"]:
            lines.append(
                f"| {r['model']} | {g['layer']} | {g['steps']} | {g['pairs']} | {g['mean_tokens']:.0f} | "
                f"{g['median_s']:.2f} | {g['p90_s']:.2f} | {g['median_rel_residual']:.2%} | "
                f"{g['max_rel_residual']:.1%} | {g['share_within_2pct']:.0%} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.explain_speed", description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="me5-small,minilm-en")
    parser.add_argument("--pairs", type=int, default=10, help="pairs per grid setting")
    parser.add_argument("--convergence-pairs", type=int, default=200)
    parser.add_argument("--steps", default="6,12,24", help="grid steps for transformer models")
    parser.add_argument("--native-steps", default="16,32,64", help="grid steps for muse (no layers, ReLU kinks)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="results/explain")
    parser.add_argument("--name", default="explain-speed", help="file name of the results (.json and .md)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--quick", action="store_true", help="a few pairs, small steps: seconds (the test runs it)")
    parser.add_argument("--headline-only", action="store_true", help="only the ~20-token pair, the alignment, memory")
    args = parser.parse_args(argv)
    args.steps = [int(s) for s in args.steps.split(",")]
    args.native_steps = [int(s) for s in args.native_steps.split(",")]
    if args.quick:
        args.pairs, args.convergence_pairs, args.steps = 2, 3, [2, 4]
    started = time.perf_counter()
    results = {
        "benchmark": "explain-speed",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cpu": cpu_name(),
        "isa": isa_flags(),
        "threads": args.threads,
        "precision": PRECISION,
        "load_start": list(os.getloadavg()),
        "quick": args.quick,
        "models": [],
    }
    for name in args.models.split(","):
        results["models"].append(measure_model(name, args))
    results["load_end"] = list(os.getloadavg())
    results["total_s"] = round(time.perf_counter() - started, 1)
    out = Path(args.out)
    atomic_write_text(out / f"{args.name}.json", json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    text = markdown(results)
    atomic_write_text(out / f"{args.name}.md", text)
    print(text)
    print(f"wrote {out / args.name}.json and .md ({results['total_s']:.0f} s)")


if __name__ == "__main__":
    main()
