"""The Markdown tables ``benchmarks.encode_speed`` prints for each model: throughput, peak memory and export time per
backend, accuracy against the first backend, vector agreement, and what limits int8 throughput.

A helper module of that benchmark (no ``main``).
"""

from __future__ import annotations

import numpy as np


def tables(result: dict) -> str:
    """Markdown of one model's result (the dict written to ``encode-speed-<model>.json``)."""
    speed, mem, acc = result["throughput"], result.get("memory", {}), result.get("accuracy", {})
    first = next(iter(speed))
    lines = [
        f"### {result['model']}, {result['threads']} threads, {result['n_sentences']} STS test sentences "
        f"({','.join(result['langs'])}); CPU {result['cpu']} ({', '.join(result['isa']) or 'no AVX2'})",
        "",
        f"| backend | sentences/s (median) | vs {first} (median of paired runs) | peak RSS | export |",
        "|---|---:|---:|---:|---:|",
    ]
    for b, sp in speed.items():
        rss = f"{mem[b]['peak_rss_mb']:.0f} MB" if b in mem else "-"
        export = f"{result['export_s'][b]:.1f} s" if b in result["export_s"] else "-"
        lines.append(f"| {b} | {sp['sentences_per_s']:,.0f} | {sp[f'speedup_vs_{first}']:.2f}x | {rss} | {export} |")
    lines += [f"| {b} | refused: {why} | | | |" for b, why in result.get("refused", {}).items()]
    if acc:
        langs = list(acc[first]["tatoeba_acc_mean"])
        lines += [
            "",
            "| backend | STS en-en | STS cross-12 | Tatoeba mean (" + ", ".join(langs) + ") |",
            "|---|---:|---:|---:|",
        ]
        ref = acc[first]
        for b, a in acc.items():
            tat, tat_ref = (float(np.mean(list(x["tatoeba_acc_mean"].values()))) for x in (a, ref))
            cells = [
                (a["sts_spearman"]["en-en"], ref["sts_spearman"]["en-en"]),
                (a["cross12_spearman"], ref["cross12_spearman"]),
                (tat, tat_ref),
            ]
            lines.append(
                f"| {b} | "
                + " | ".join(
                    "-" if v is None else f"{v:.2f}" if b == first else f"{v:.2f} ({v - r:+.2f})" for v, r in cells
                )
                + " |"
            )
    if result.get("agreement"):
        lines += ["", f"| backend | mean cosine to {first} | min cosine | max abs diff |", "|---|---:|---:|---:|"]
        for b, a in result["agreement"].items():
            lines.append(f"| {b} | {a['mean_cos']:.5f} | {a['min_cos']:.5f} | {a['max_abs']:.2e} |")
        if "min_cos_alone_vs_batched" in result["agreement"].get("onnx-int8", {}):
            lines.append(
                f"\nint8 batch dependence: min cosine between a vector encoded alone and in its batch "
                f"{result['agreement']['onnx-int8']['min_cos_alone_vs_batched']:.5f} (first 200 sentences)"
            )
    lim = result.get("limits", {})
    if "not_applicable" in lim:
        lines += ["", f"int8 limits: not measured ({lim['not_applicable']})"]
    elif lim:
        lines += [
            "",
            f"int8 limits: tokenisation alone {lim['tokenize_sentences_per_s']:,.0f} sentences/s; "
            f"{lim['mean_tokens']} tokens/sentence; padding +{lim['padding_overhead_sorted_pct']}% "
            f"(length-sorted) vs +{lim['padding_overhead_unsorted_pct']}% (input order)",
        ]
        shares = ", ".join(f"{op} {pct}%" for op, pct in lim["op_share_pct"].items())
        lines += ["", f"int8 kernel time by operator (one thread): {shares}"]
        if "sweep" in lim:
            lines += ["", "| int8 setting | sentences/s (median) |", "|---|---:|"]
            lines += [f"| {k} | {v['sentences_per_s']:,.0f} |" for k, v in lim["sweep"].items()]
    return "\n".join(lines)
