"""What if? latency: how long an edit of an explained pair takes to come back with its score and its heatmap.

    nice -n 5 python -m benchmarks.what_if_speed [--model me5-small] [--edits 20] [--threads 2] [--out results/what-if]

- **Edits**: ``--edits`` pairs of the teaching lesson (``docs/teaching/lesson-pairs.tsv``: paraphrases, translations
  and unrelated sentences in six languages), spread over the file; in each, the word carrying the most (the largest
  word total, what *Why this score?* lists first) is dropped, from sentence 1 in even edits and from sentence 2 in odd
  ones: the click a reader makes first.
- **Warm**: the model is loaded (without the embedding cache: every text is encoded, as an edited sentence new to
  the cache is), one what-if is run before timing, and each pair's explanation is computed before its edit is timed
  (in the app the pair was explained before What if? is offered). Timed: :func:`mlse.explain.what_if` with that
  explanation, end to end (both pairs scored as ``python -m mlse score`` scores them, the edited sentence
  re-attributed, the other reused), and the same without the new heatmap (``explain_new=False``: the numbers only).
- **Checks**: every new score equals :func:`mlse.encoders.protocol.similarity` of the edited pair (the score command's
  function), and how well the explanation predicted each change (Pearson r over the edits, the share with the right
  sign, the median absolute miss).
- **Machine**: CPU model, ISA flags, torch threads, load average at start and end (the machine may be shared).

``--quick`` (what the test runs): 3 edits. Writes ``<out>/<name>.json`` and ``.md`` (default name ``what-if-speed``)
atomically and prints the Markdown.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from benchmarks.common import QUICK_HELP, cpu_name, isa_flags, output_dir
from mlse.atomic import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "docs" / "teaching" / "lesson-pairs.tsv"
TARGET_S = 1.0


def lesson_pairs(n: int) -> list[dict]:
    """``n`` rows of the lesson file, spread evenly over it (every kind and language in turn)."""
    with LESSON.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    picked = np.linspace(0, len(rows) - 1, num=min(n, len(rows))).round().astype(int)
    return [rows[i] for i in dict.fromkeys(picked.tolist())]


def top_word(explanation, side: int) -> int:
    """The droppable word of sentence ``side`` with the largest word total."""
    from mlse.explain.edits import droppable

    totals = explanation.word_totals1 if side == 1 else explanation.word_totals2
    return max(droppable(explanation, side), key=lambda k: float(totals[k]))


def measure(model, rows: list[dict]) -> list[dict]:
    from mlse.encoders.protocol import similarity
    from mlse.explain import explain_pair, what_if

    warm = explain_pair(model, rows[0]["sentence1"], rows[0]["sentence2"])
    what_if(model, warm.sentence1, warm.sentence2, drop1=[top_word(warm, 1)], explanation=warm)  # warm-up
    out, e, e32 = [], warm, None
    for n, row in enumerate(rows):
        side = 1 if n % 2 == 0 else 2
        e = explain_pair(model, row["sentence1"], row["sentence2"], reuse=e)  # untimed; lesson rows share sentences
        k = top_word(e, side)
        drop = {"drop1": [k]} if side == 1 else {"drop2": [k]}
        started, cpu = time.perf_counter(), time.process_time()
        numbers = what_if(model, e.sentence1, e.sentence2, explanation=e, explain_new=False, **drop)
        numbers_s, numbers_cpu = time.perf_counter() - started, time.process_time() - cpu
        started, cpu = time.perf_counter(), time.process_time()
        full = what_if(model, e.sentence1, e.sentence2, explanation=e, **drop)
        full_s, full_cpu = time.perf_counter() - started, time.process_time() - cpu
        expected = float(similarity(model, [full.edited1], [full.edited2])[0][0])
        float32 = {}
        if e.precision != "float32":  # the same edit with float32 products: the time and the matrix they give
            e32 = explain_pair(model, row["sentence1"], row["sentence2"], precision="float32", reuse=e32)
            started = time.perf_counter()
            exact = what_if(model, e.sentence1, e.sentence2, explanation=e32, **drop).new_explanation
            gap = np.abs(full.new_explanation.matrix - exact.matrix).max() / np.abs(exact.matrix).max()
            float32 = {"what_if_float32_s": time.perf_counter() - started, "matrix_gap_vs_float32": float(gap)}
        out.append(
            {
                "kind": row.get("kind", ""),
                "langs": f"{row.get('lang1', '?')}-{row.get('lang2', '?')}",
                "side": side,
                "word": (e.words1 if side == 1 else e.words2)[k],
                "tokens": [len(e.tokens1), len(e.tokens2)],
                "edited_tokens": len((full.new_explanation.tokens1, full.new_explanation.tokens2)[side - 1]),
                "score": full.score,
                "new_score": full.new_score,
                "delta": full.delta,
                "predicted_delta": full.predicted_delta,
                "predicted_delta_pairs": full.predicted_delta_pairs,
                "calibrated": full.calibrated,
                "new_calibrated": full.new_calibrated,
                "equal_to_score": full.new_score == expected and numbers.new_score == expected,
                "numbers_s": numbers_s,
                "what_if_s": full_s,
                "numbers_cpu_s": numbers_cpu,
                "what_if_cpu_s": full_cpu,
                "explain_s": full.new_explanation.seconds,
                "new_residual": full.new_explanation.relative_residual,
                "layer": e.layer,
                "steps": e.steps,
                "precision": e.precision,
                **float32,
            }
        )
        print(
            f"{n + 1}/{len(rows)} {out[-1]['langs']} {out[-1]['kind']}: drop {out[-1]['word']!r} (sentence {side}): "
            f"{full.delta:+.4f} (predicted {full.predicted_delta:+.4f}), {full_s:.2f} s (numbers {numbers_s:.3f} s)",
            flush=True,
        )
    return out


def summary(edits: list[dict]) -> dict:
    full = [e["what_if_s"] for e in edits]
    numbers = [e["numbers_s"] for e in edits]
    delta = np.asarray([e["delta"] for e in edits])
    predicted = np.asarray([e["predicted_delta"] for e in edits])
    pairs_only = np.asarray([e["predicted_delta_pairs"] for e in edits])

    def corr(a: np.ndarray) -> float | None:
        return float(np.corrcoef(a, delta)[0, 1]) if len(delta) > 2 and np.std(a) > 0 and np.std(delta) > 0 else None

    return {
        "edits": len(edits),
        "what_if_median_s": statistics.median(full),
        "what_if_p95_s": float(np.percentile(full, 95)),
        "numbers_median_s": statistics.median(numbers),
        "numbers_p95_s": float(np.percentile(numbers, 95)),
        "what_if_cpu_median_s": statistics.median(e["what_if_cpu_s"] for e in edits),
        "what_if_cpu_p95_s": float(np.percentile([e["what_if_cpu_s"] for e in edits], 95)),
        "numbers_cpu_median_s": statistics.median(e["numbers_cpu_s"] for e in edits),
        "explain_median_s": statistics.median(e["explain_s"] for e in edits),
        "mean_tokens": float(np.mean([t for e in edits for t in e["tokens"]])),
        "all_equal_to_score": all(e["equal_to_score"] for e in edits),
        "pearson_predicted": corr(predicted),
        "pearson_pairs_only": corr(pairs_only),
        "same_sign": float(np.mean(np.sign(predicted) == np.sign(delta))),
        "same_sign_pairs_only": float(np.mean(np.sign(pairs_only) == np.sign(delta))),
        "median_abs_miss": float(np.median(np.abs(delta - predicted))),
        "median_abs_delta": float(np.median(np.abs(delta))),
        "max_new_residual": max(e["new_residual"] for e in edits),
        **(
            {
                "what_if_float32_median_s": statistics.median(e["what_if_float32_s"] for e in edits),
                "what_if_float32_p95_s": float(np.percentile([e["what_if_float32_s"] for e in edits], 95)),
                "max_matrix_gap_vs_float32": max(e["matrix_gap_vs_float32"] for e in edits),
            }
            if all("what_if_float32_s" in e for e in edits)
            else {}
        ),
    }


def markdown(r: dict) -> str:
    s = r["summary"]

    def f(v) -> str:
        return "–" if v is None else f"{v:.2f}"

    lines = [
        f"# What if? latency ({r['created']})",
        "",
        f"`{r['command']}`. CPU {r['cpu']} ({', '.join(r['isa']) or 'no AVX2'}), {r['threads']} torch threads, "
        f"nice {r['nice']}, load average {r['load_start'][0]:.1f} at start, {r['load_end'][0]:.1f} at end. Model "
        f"{r['model']} (layer {r['layer']}, {r['steps']} steps, {r.get('precision', 'float32')} products, the "
        "defaults). {s['edits']} edits of the lesson pairs "
        f"(~{s['mean_tokens']:.0f} tokens a sentence): the word carrying the most dropped, from sentence 1 and 2 in "
        "turn; warm (model loaded, pair explained before the edit).",
        "",
        "| what | median s | p95 s | median CPU s (all threads) | p95 CPU s | target |",
        "|---|---|---|---|---|---|",
        f"| what if: new score, 0-5, prediction and the new heatmap | {s['what_if_median_s']:.2f} | "
        f"{s['what_if_p95_s']:.2f} | {s['what_if_cpu_median_s']:.2f} | {s['what_if_cpu_p95_s']:.2f} | "
        f"< {TARGET_S:.0f} s |",
        f"| what if, numbers only (no new heatmap) | {s['numbers_median_s']:.3f} | {s['numbers_p95_s']:.3f} | "
        f"{s['numbers_cpu_median_s']:.3f} | | |",
        f"| of which the edited pair's explanation (one sentence) | {s['explain_median_s']:.2f} | | | | |",
        *(
            [
                f"| what if with float32 products (for comparison) | {s['what_if_float32_median_s']:.2f} | "
                f"{s['what_if_float32_p95_s']:.2f} | | | |",
                "",
                f"The new heatmap with bfloat16 products vs float32 products: largest difference "
                f"{s['max_matrix_gap_vs_float32']:.2%} of the float32 matrix's largest cell.",
            ]
            if "max_matrix_gap_vs_float32" in s
            else []
        ),
        "",
        "Wall time moves with the machine's load (the load average above). CPU time (summed over the process's "
        "threads) moves much less with one torch thread, where it is what an idle core would take; with more threads "
        "it also counts the time OpenMP threads spin waiting for a core, so on a loaded machine it over-counts.",
        "",
        f"Every new score equals `similarity` of the edited pair (the score command's function): "
        f"**{'yes' if s['all_equal_to_score'] else 'NO'}**. Largest residual of a new explanation: "
        f"{s['max_new_residual']:.2%}.",
        "",
        "How well the explanation predicted the change (drop of the top word):",
        "",
        "| predicted from | Pearson r with the real change | right sign | median miss | median real change |",
        "|---|---|---|---|---|",
        f"| word totals (row/column + own term) | {f(s['pearson_predicted'])} | {s['same_sign']:.0%} | "
        f"{s['median_abs_miss']:.4f} | {s['median_abs_delta']:.4f} |",
        f"| the word's pairs alone (row/column sum) | {f(s['pearson_pairs_only'])} | "
        f"{s['same_sign_pairs_only']:.0%} | | |",
        "",
        "| # | languages | kind | dropped (sentence) | tokens | change | predicted | what if s | numbers s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n, e in enumerate(r["edits"], 1):
        lines.append(
            f"| {n} | {e['langs']} | {e['kind']} | {e['word']} ({e['side']}) | {e['tokens'][0]}, {e['tokens'][1]} | "
            f"{e['delta']:+.4f} | {e['predicted_delta']:+.4f} | {e['what_if_s']:.2f} | {e['numbers_s']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.what_if_speed", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="me5-small")
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None, help="folder for the results (default results/what-if)")
    parser.add_argument("--name", default="what-if-speed", help="file name of the results (.json and .md)")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    parser.add_argument("--markdown-from", default=None, help="only rewrite the .md beside this result .json")
    args = parser.parse_args(argv)
    if args.markdown_from:
        source = Path(args.markdown_from)
        atomic_write_text(source.with_suffix(".md"), markdown(json.loads(source.read_text(encoding="utf-8"))))
        print(f"wrote {source.with_suffix('.md')}")
        return
    if args.edits < 1:
        parser.error(f"--edits must be 1 or more, got {args.edits}")
    import torch

    import mlse

    torch.set_num_threads(args.threads)
    edits = 3 if args.quick else args.edits
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    model = mlse.load_model(args.model, cache=False)  # every text encoded: an edited sentence is new to the cache
    results = {
        "benchmark": "what-if-speed",
        "command": "python -m benchmarks.what_if_speed"
        + (f" --model {args.model}" if args.model != "me5-small" else "")
        + (f" --edits {args.edits}" if args.edits != 20 and not args.quick else "")
        + (f" --threads {args.threads}" if args.threads != 2 else "")
        + (f" --name {args.name}" if args.name != "what-if-speed" else "")
        + (" --quick" if args.quick else ""),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cpu": cpu_name(),
        "isa": isa_flags(),
        "threads": args.threads,
        "nice": os.nice(0),
        "load_start": list(os.getloadavg()),
        "quick": args.quick,
        "model": str(getattr(model, "name", args.model)),
    }
    results["edits"] = measure(model, lesson_pairs(edits))
    first = results["edits"][0]
    results["layer"], results["steps"], results["precision"] = first["layer"], first["steps"], first["precision"]
    results["summary"] = summary(results["edits"])
    results["load_end"] = list(os.getloadavg())
    out = output_dir(args.out, args.quick, ROOT / "results" / "what-if", "what-if-speed")
    atomic_write_text(out / f"{args.name}.json", json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    text = markdown(results)
    atomic_write_text(out / f"{args.name}.md", text)
    print(text)
    print(f"wrote {out / args.name}.json and .md")


if __name__ == "__main__":
    main()
