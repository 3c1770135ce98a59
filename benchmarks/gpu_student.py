"""The students study's recipe on a CUDA GPU: the same training as on 2 CPU cores, how much faster, and what it scores.

    # on the GPU machine: train, then pack each run (adapter + logs, no merged weights) into OUT/<run>.tar
    python -m benchmarks.gpu_student [--recipe ema-frozen-cosent-w0.01+lora] [--steps 240] [--minutes 3] --out OUT
    # here: rebuild each student from its adapter, evaluate it as the study does, write the report
    python -m benchmarks.gpu_student --evaluate OUT [--out results/students/gpu]

Training runs :func:`mlse.train.finetune.finetune` on the recipe's configuration
(:func:`mlse.experiments.distillation.recipe_config`: the same data sample, seed, batches, dev evaluation and
learning rate as the CPU study) on ``cuda`` under its default precision, with the budget on the wall clock, twice:

* ``<recipe>-gpu-<N>steps``: stopped after ``--steps`` optimiser steps (the CPU run's 240 for the 20-minute
  recipe), so that the student matches the CPU one step for step and the speed-up is a like-for-like ratio;
* ``<recipe>-gpu-<M>min``: ``--minutes`` of wall-clock budget (the longest run a short GPU lease allows).

Before the timed runs a few untimed steps pick the GPU's kernels. Evaluation (``--evaluate``) happens on the CPU
where the merged weights can be rebuilt from the adapter (a lent GPU machine returns 16 MiB per file; a merged
me5-small is 466 MB): :func:`mlse.experiments.distillation.run_recipe` with the same overrides finds the finished
run and only evaluates it (STS Multi MT test, 17 pairs with CIs; Tatoeba-14 with xSIM). The report sets each GPU run
beside the CPU result of the same recipe (``results/students/<recipe>.json``): seconds per training step, sentences
per second, the speed-up, cross-12, EN-EN, Tatoeba-14.

``--quick`` trains a tiny student for 2 steps on the CPU, packs it, and checks that the student rebuilt from the
packed adapter encodes as the trained one (the study's evaluation of a tiny model takes minutes: not in quick mode).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tarfile
import time
from pathlib import Path

from benchmarks.common import QUICK_HELP, machine, output_dir
from mlse.atomic import atomic_write_text

DEFAULT_RECIPE = "ema-frozen-cosent-w0.01+lora"
RUNS = Path("runs") / "students-gpu"  # relative, as the study's: the saved config's ``out`` is the same on both sides
RUN_FILES = ("finetune_config.json", "log.jsonl", "metrics.json")  # with adapter/: what comes back from the GPU
TRAIN_FILE = "gpu-train.json"


def tar_file(name: str) -> str:
    """A run's packed file: letters, digits, '.', '_', '-' only (what a lent machine's output folder returns)."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name) + ".tar"


def command_line(argv: list[str]) -> str:
    """The command as run, the output folder named ``OUT`` (a lent machine's path means nothing elsewhere)."""
    words = ["OUT" if i and argv[i - 1] == "--out" else a for i, a in enumerate(argv)]
    return " ".join(["python -m benchmarks.gpu_student", *words])


def plan(recipe: str, steps: int, minutes: float) -> dict[str, dict]:
    """Run name -> the overrides of the recipe's configuration (wall-clock budget on cuda)."""
    runs = {f"{recipe}-gpu-{steps}steps": dict(max_steps=steps, budget_minutes=60.0)}
    if minutes > 0:
        runs[f"{recipe}-gpu-{minutes:g}min"] = dict(max_steps=None, budget_minutes=minutes)
    return runs


def overrides_for(overrides: dict, *, device: str, student: str | None, quick: bool) -> dict:
    """Everything a run sets beside the recipe: the same on the GPU (training) and here (evaluation)."""
    out = dict(overrides, budget_clock="wall", device=device)
    if student:
        out["student"] = student
    if quick:
        out.update(
            max_pairs=16, dev_max_pairs=20, eval_every_steps=1, max_steps=2, sts_batch_size=8, eval_at_start=False
        )
    return out


def train(args, recipe_name: str, recipe: dict, out: Path) -> dict:
    import torch

    from mlse.experiments.distillation import recipe_config
    from mlse.train.finetune import finetune

    device = args.device or ("cpu" if args.quick else "cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("error: no CUDA GPU here (use --quick to check the script on the CPU)")
    runs_root = Path(args.runs)
    if not args.quick:  # untimed: the first steps of each batch shape pick kernels (2-10x slower on a first pass)
        warm = dict(overrides_for({}, device=device, student=args.student, quick=False), max_steps=20)
        warm.update(eval_at_start=False, eval_every_steps=10_000, budget_minutes=5.0)
        finetune(recipe_config("warm-up", recipe, runs_root / "_warm-up", data_dir=args.data_dir, **warm))
    record = {}
    for name, extra in plan(recipe_name, args.steps, 0 if args.quick else args.minutes).items():
        settings = overrides_for(extra, device=device, student=args.student, quick=args.quick)
        config = recipe_config(name, recipe, runs_root, data_dir=args.data_dir, **settings)
        print(f"{name}: training on {device} ({settings})", flush=True)
        started = time.perf_counter()
        metrics = finetune(
            config,
            progress=lambda r, n=name: print(
                f"{n}: step {r['step']} dev {r['dev_spearman']:.2f} ({r['wall_s']:.0f} s)", flush=True
            ),
        )
        wall = time.perf_counter() - started
        run = Path(config.out)
        packed = out / tar_file(name)  # one file per run (a lease returns at most 8), written whole or not at all
        with tarfile.open(packed.with_suffix(".part"), "w") as tar:
            for file in RUN_FILES:
                tar.add(run / file, arcname=file)
            tar.add(run / "adapter", arcname="adapter")
        os.replace(packed.with_suffix(".part"), packed)
        saved = json.loads((run / "finetune_config.json").read_text())
        record[name] = {
            "overrides": {k: v for k, v in settings.items() if k != "student"},
            "call_wall_s": round(wall, 1),
            **{k: metrics.get(k) for k in ("steps", "train_s", "wall_s", "sentences_per_s", "best_step")},
            "best_dev_spearman": metrics.get("best_dev_spearman"),
            "precision": metrics.get("precision"),
            "gpu": saved.get("gpu"),
        }
        print(f"{name}: {record[name]}", flush=True)
    result = {
        "command": command_line(sys.argv[1:]),
        "recipe": recipe_name,
        "machine": machine()
        | {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "torch": torch.__version__},
        "runs": record,
    }
    atomic_write_text(out / TRAIN_FILE, json.dumps(result, indent=1) + "\n")
    return result


def unpack(tar_path: Path, run: Path) -> None:
    """A run's files from the GPU into ``run`` (members by name only: nothing outside the folder is written)."""
    run.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tar_path) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if member.isfile() and ".." not in parts and not Path(member.name).is_absolute():
                target = run.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with tar.extractfile(member) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)


def rebuild(source: Path, name: str, runs_root: Path) -> Path:
    """Unpack run ``name`` from ``source`` into ``runs_root`` and rebuild its merged model from the adapter."""
    from mlse.atomic import atomic_dir
    from mlse.encoders.catalogue import materialise, resolve_model
    from mlse.encoders.lora_merge import build_merged

    run = runs_root / name
    unpack(source / tar_file(name), run)
    config = json.loads((run / "finetune_config.json").read_text())
    # the merged weights stay on the GPU machine: rebuilt from the adapter just unpacked (never a stale folder)
    with atomic_dir(run / "model") as tmp:
        build_merged(Path(materialise(resolve_model(config["student"]))), run / "adapter", tmp)
    return run


def evaluate(args, recipe_name: str, recipe: dict, out: Path) -> str:
    """Rebuild, evaluate and report every run packed under ``--evaluate``."""
    from mlse.experiments.distillation import run_recipe

    source = Path(args.evaluate)
    trained = json.loads((source / TRAIN_FILE).read_text())
    runs_root = Path(args.runs)
    results = {}
    for name, row in trained["runs"].items():
        rebuild(source, name, runs_root)
        settings = overrides_for(row["overrides"], device="cpu", student=args.student, quick=args.quick)
        results[name] = run_recipe(
            name,
            recipe,
            runs=runs_root,
            out=out,
            data_dir=args.data_dir,
            progress=lambda msg: print(msg, flush=True),
            **settings,
        )
    cpu_file = Path(args.cpu_result or Path("results") / "students" / f"{recipe_name}.json")
    cpu = json.loads(cpu_file.read_text()) if cpu_file.is_file() else None
    report = markdown(trained, results, cpu, cpu_file, args.cpu_note)
    atomic_write_text(out / f"gpu-{recipe_name}.md", report)
    record = {"train": trained, "cpu_result": str(cpu_file) if cpu else None}
    atomic_write_text(out / f"gpu-{recipe_name}.json", json.dumps(record, indent=1) + "\n")
    return report


def check_rebuilt(source: Path, trained_runs: Path, runs_root: Path) -> float:
    """Quick mode: each run rebuilt from its packed adapter encodes as the model the run saved (max abs difference)."""
    import numpy as np

    from mlse.encoders.catalogue import materialise, resolve_model
    from mlse.encoders.torch import load_sentence_transformer

    texts = ["A man is playing a guitar.", "Ein Mann spielt Gitarre.", "Un homme joue de la guitare."]
    worst = 0.0
    for name in json.loads((source / TRAIN_FILE).read_text())["runs"]:
        run = rebuild(source, name, runs_root)
        student = json.loads((run / "finetune_config.json").read_text())["student"]
        base_folder = Path(materialise(resolve_model(student)))  # a registry name (minilm-en) or a folder, as rebuild's
        rebuilt, saved, base = (
            load_sentence_transformer(folder, device="cpu")
            for folder in (run / "model", trained_runs / name / "model", base_folder)
        )
        a, b, c = (m.encode(texts, convert_to_numpy=True) for m in (rebuilt, saved, base))
        if np.abs(a - c).max() == 0:  # a zero adapter would make the comparison below prove nothing
            raise SystemExit(f"error: {name}: the packed adapter leaves the student unchanged")
        worst = max(worst, float(np.abs(a - b).max()))
    if worst > 1e-4:
        raise SystemExit(f"error: a student rebuilt from its adapter differs from the trained one by {worst:.2g}")
    return worst


def scores(result: dict) -> tuple[float, float, float, float]:
    from mlse.experiments.distillation import summary_row

    row = summary_row(result)
    return row["cross-12"], row["en-en"], row["tatoeba-14"], row["xsim"]


def markdown(trained: dict, results: dict, cpu: dict | None, cpu_file: Path, cpu_note: str) -> str:
    """The GPU runs beside the CPU run of the same recipe."""
    gpu = next((r["gpu"] for r in trained["runs"].values() if r.get("gpu")), trained["machine"].get("gpu"))
    lines = [
        f"# `{trained['recipe']}` on a GPU ({gpu}) and on 2 CPU cores",
        "",
        f"GPU runs: `{trained['command']}` (torch {trained['machine']['torch']}); evaluated on the CPU with "
        "`python -m benchmarks.gpu_student --evaluate <that folder>`. Seconds per step count training only (dev "
        "evaluations excluded), from each run's `train_s / steps`.",
        "",
        "| run | device | steps | s / step | sentences / s | speed-up | cross-12 | EN-EN | Tatoeba-14 | xSIM |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    cpu_step = None
    if cpu:
        t = cpu["train"]
        cpu_step = t["train_s"] / t["steps"]
        c12, en, tat, xs = scores(cpu)
        lines.append(
            f"| `{cpu['recipe']}` ({cpu_file.as_posix()}) | {cpu_note}, "
            f"{t.get('precision', '?')} | {t['steps']} | {cpu_step:.2f} | {t['sentences_per_s']:.1f} | 1.0 | "
            f"{c12:.1f} | {en:.1f} | {tat:.1f} | {xs:.1f} |"
        )
    for name, result in results.items():
        t = result["train"]
        step = t["train_s"] / max(1, t["steps"])
        ratio = f"{cpu_step / step:.0f}x" if cpu_step and step > 0 else "–"
        c12, en, tat, xs = scores(result)
        lines.append(
            f"| `{name}` | {t.get('device', '?')}, {t.get('precision', '?')} | {t['steps']} | {step:.3f} | "
            f"{t['sentences_per_s']:.1f} | {ratio} | {c12:.1f} | {en:.1f} | {tat:.1f} | {xs:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    from mlse.experiments.distillation import parse_recipe

    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_student", description=__doc__.split("\n")[0])
    parser.add_argument("--recipe", default=DEFAULT_RECIPE, help="a students-study recipe (NAME or NAME+lora)")
    parser.add_argument("--steps", type=int, default=240, help="the equal-steps run's steps (the CPU run's)")
    parser.add_argument("--minutes", type=float, default=3.0, help="the budgeted run's wall minutes (0: none)")
    parser.add_argument("--student", default=None, help="another student than the recipe's (tests: a tiny model)")
    parser.add_argument("--runs", default=str(RUNS), help="run folders (relative: the same path on both machines)")
    parser.add_argument("--evaluate", default=None, help="a folder this script trained into: evaluate it here")
    parser.add_argument("--cpu-result", default=None, help="the CPU result of the recipe (default: the study's)")
    parser.add_argument("--device", default=None, help="where to train (default: cuda; --quick: cpu)")
    parser.add_argument("--cpu-note", default="2 CPU cores", help="the CPU run's machine, as the report names it")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args()
    recipe_name, recipe = parse_recipe(args.recipe)
    if args.quick:
        args.steps = 2
    if args.evaluate:
        out = output_dir(args.out, args.quick, Path("results") / "students" / "gpu", "gpu-student")
        print(evaluate(args, recipe_name, recipe, out))
        return
    out = output_dir(args.out, args.quick, Path("results") / "students" / "gpu-train", "gpu-student")
    out.mkdir(parents=True, exist_ok=True)
    train(args, recipe_name, recipe, out)
    if args.quick:  # what comes back from the GPU rebuilds the trained student (the study's evaluation: minutes)
        worst = check_rebuilt(out, Path(args.runs), out / "rebuilt")
        print(f"rebuilt from the adapters: max |difference| {worst:.2g}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
