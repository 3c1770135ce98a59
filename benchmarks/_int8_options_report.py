"""The Markdown report of ``benchmarks.int8_options``: one row per option (accuracy, speed, AVX2 saturation), then
the sensitivity of each (role, layer) group, from the result dict the script writes as JSON.

A helper module of that benchmark (no ``main``).
"""

from __future__ import annotations


def saturation(sat: dict | None) -> str:
    """The AVX2 column's cell: outputs hit and relative RMS error ("-" for a graph without MatMulInteger)."""
    return "-" if not sat else f"{sat['outputs_hit_pct']:.2f}%, {sat['rel_rms_error']:.1e}"


def report(result: dict) -> str:
    """The Markdown tables of one run (what ``<out>/int8-options-<model>.md`` holds)."""
    fp32 = result["accuracy"]["fp32 ONNX"]["cross"]
    group = result["accuracy"]["fp32 ONNX"]["group"]
    nan = float("nan")
    lines = [
        f"## int8 options for {result['model']}: {result['threads']} threads, CPU {result['cpu']} "
        f"({', '.join(result['isa'])})",
        "",
        f"`{result['command']}`",
        "",
        f"Load average {result['load_start'][0]:.1f} at the start, {result['load_end'][0]:.1f} at the end; "
        f"speed: median of {result['runs']} interleaved runs over {result['n_sentences']} STS en test sentences "
        "(ratios paired within a run). Options with the same graph structure (the first eight int8 rows) run the "
        "same kernels, so their spread in speed is the measurement noise under that load. AVX2-only speed cannot "
        "be measured on this CPU: onnxruntime picks its int8 kernels from CPUID, with no switch to force the AVX2 "
        "ones; the last column emulates the one way an AVX2 kernel computes differently (int16 pair sums), and "
        "7-bit weights (reduce_range) rule it out, so their accuracy here is their accuracy on AVX2.",
        "",
        f"| option | MatMuls kept fp32 | {group} | vs fp32 | en-en | sentences/s | vs torch | vs fp32 ONNX "
        "| CPU time vs fp32 ONNX | AVX2 saturation (emulated): outputs hit, rel. error |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, acc in result["accuracy"].items():
        sp = result["speed"].get(name, {})
        kept = "all" if acc.get("kept_fp32") is None else str(acc["kept_fp32"])
        cells = [
            kept,
            f"{acc['cross']:.2f}",
            f"{acc['cross'] - fp32:+.2f}",
            f"{acc['spearman'].get('en-en', nan):.2f}",
            f"{sp.get('sentences_per_s', nan):.0f}",
            f"{sp.get('vs_torch', nan):.2f}x",
            f"{sp.get('vs_fp32', nan):.2f}x",
            f"{sp.get('cpu_vs_fp32', nan):.2f}x",
            saturation(result["avx2_saturation"].get(name)),
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if "torch" in result["speed"]:
        lines.append(f"| torch (speed only) | | | | | {result['speed']['torch']['sentences_per_s']:.0f} | 1.00x | | |")
    lines += [
        "",
        "Sensitivity: only one group quantised (previous recipe), 1 - mean cosine to fp32 on "
        f"{result['n_dev']} STS dev sentences (10 languages); outlier ratio = largest / median per-token max "
        "|x| of the group's input on the same sentences.",
        "",
        "| group | 1 - mean cos | min cos | outlier ratio |",
        "|---|---:|---:|---:|",
    ]
    for r in result["sensitivity"]:
        ratio = f"{r['outlier_ratio']:.1f}" if r.get("outlier_ratio") is not None else ""
        lines.append(f"| {r['group']} | {r['damage']:.2e} | {r['min_cos']:.4f} | {ratio} |")
    return "\n".join(lines) + "\n"
