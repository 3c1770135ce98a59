"""How long Project waits when pressed while the app's warm start computes the same map, against the warm's remaining
time for that map (the target: no longer, but for reading the warm's cache files and drawing).

    python -m benchmarks.map_during_warm [--model NAME] [--press-at 0.15] [--backend torch] [--data-dir DIR]
                                         [--out results/app/map-during-warm.json] [--quick]

In this process, on a fresh embedding and projection cache (a temporary ``MLSE_CACHE`` whose other folders -- the
converted and exported model files, muse's table, UMAP's compiled-kernels marker -- are linked from the cache in use,
so that what is timed is the map, not a conversion): the app's state and its warm start
(:func:`mlse.serving.warm.start_app_warm`) on the map's own steps (the model's files, the model loaded, UMAP's kernels,
the default map). When the map step has reached ``--press-at`` of its progress (0.05-0.30 is its encoding), Project is
pressed as the tab presses it (:func:`mlse.ui.map_tab.project_map`, the tab's defaults). Recorded: the seconds the
press waited, the seconds from the press until the warm finished the map (its remaining time), the map step's own
seconds, how many projections were computed (one per space: the press computed none), the tab's note at the press (the
warm's count and ETA) and, for the overhead, a press once everything is cached. Writes the JSON and a Markdown table
next to it; the JSON records the CPU, its ISA flags, core count and load average.

``--quick``: 5 sentences per language projected with PCA (the model: ``--model``, default minilm-en), written to a
temporary folder unless ``--out`` is given; the map may be done before the press (the numbers mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import QUICK_HELP, machine, output_file
from mlse.atomic import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
QUICK_MODEL = "minilm-en"
FRESH = ("embeddings", "projections")  # what the measured map computes: empty in the scratch cache
POLL_S = 0.02


def scratch_cache(scratch: Path) -> Path:
    """A cache whose embeddings and projections are empty and whose other entries are those of the cache in use."""
    from mlse.dirs import cache_root

    real, cache = cache_root(), scratch / "cache"
    cache.mkdir(parents=True)
    for entry in real.iterdir() if real.is_dir() else []:
        if entry.name in FRESH or entry.name.startswith("."):
            continue
        if entry.is_file():
            shutil.copy2(entry, cache / entry.name)  # a small memo the run may rewrite
        else:
            (cache / entry.name).symlink_to(entry, target_is_directory=True)
    return cache


def measure(model: str, press_at: float, data_dir: str | None, backend: str, quick: bool) -> dict:
    from mlse.analysis import projection
    from mlse.serving.app_state import AppState
    from mlse.serving.warm import start_app_warm, warm_status
    from mlse.serving.warm_steps import TAB_DEFAULTS, TabDefaults, plain_name
    from mlse.ui import map_tab

    defaults = TabDefaults(map_sentences=5, map_method="pca") if quick else TAB_DEFAULTS
    n, method = defaults.map_sentences, defaults.map_method
    state = AppState(data_dir=data_dir, backend=backend)
    langs = map_tab.language_choices(state)[1]
    projected: list[int] = []
    real_project = projection.project_2d_explained

    def counting(X, **kwargs):
        projected.append(len(X))
        return real_project(X, **kwargs)

    projection.project_2d_explained = counting  # every projection, the warm's and the press's
    wanted = {f"files:{plain_name(model)}", f"load:{model}", "umap", f"map:{model}"}
    finished: dict[str, tuple[float, str, float]] = {}

    def on_step(status, fraction) -> None:
        finished[status.name] = (time.perf_counter(), status.state, status.seconds)

    started = time.perf_counter()
    warm = start_app_warm(state, models=[model], only=wanted.__contains__, defaults=defaults, on_step=on_step)
    step_name = f"map:{model}"
    while warm.is_alive():
        step = next((s for s in warm_status().steps if s.name == step_name), None)
        if step is not None and (step.finished or (step.state == "running" and step.fraction >= press_at)):
            break
        time.sleep(POLL_S)
    _, tab_note = map_tab.warm_view(state, model, langs, n, method=method)
    step = next((s for s in warm_status().steps if s.name == step_name), None)
    pressed = time.perf_counter()
    messages: list[str] = []
    out = map_tab.project_map(state, model, langs, n, method=method, progress=lambda f, m: messages.append(m))
    waited = time.perf_counter() - pressed
    warm.join()
    projections_then = len(projected)
    again = time.perf_counter()
    map_tab.project_map(state, model, langs, n, method=method)  # everything cached: reading the files and drawing
    draw = time.perf_counter() - again
    projection.project_2d_explained = real_project
    done_at, state_of_map, map_seconds = finished.get(step_name, (float("nan"), "missing", float("nan")))
    views = out.result.views if out.result is not None else {}
    return {
        "model": model,
        "backend": backend,
        "languages": langs,
        "sentences_per_language": n,
        "method": method,
        "press_at": press_at,
        "pressed_after_s": round(pressed - started, 2),
        "step_at_press": None if step is None else {"state": step.state, "fraction": step.fraction, "note": step.note},
        "tab_note_at_press": tab_note,
        "press_wait_s": round(waited, 2),
        "warm_remaining_s": round(max(0.0, done_at - pressed), 2),
        "warm_map_step_s": round(map_seconds, 2),
        "warm_map_state": state_of_map,
        "draw_from_cache_s": round(draw, 2),
        "projections_computed": projections_then,
        "spaces": list(views),
        "press_from_cache": bool(views) and all(v.from_cache for v in views.values()),
        "press_waited_for_the_warm": any("warm start is computing this map" in m for m in messages),
        "press_note": out.note.split("\n\n")[0],
    }


def markdown(report: dict) -> str:
    r, m = report["result"], report["machine"]
    return "\n".join(
        [
            "# Project pressed while the app's warm start computes the same map",
            "",
            f"Command: `{report['command']}`. {m['cpu']} ({', '.join(m['isa'])}), {m['cpus']} CPUs, load average "
            f"{m['load_average']:.1f} at the start (a shared machine: wall times move with its load).",
            "",
            f"Map: {r['model']}, {len(r['languages'])} languages x {r['sentences_per_language']} sentences, "
            f"{r['method'].upper()}; pressed {r['pressed_after_s']:.1f} s after the warm started, the map step at "
            f"{(r['step_at_press'] or {}).get('fraction', 0) * 100:.0f} %.",
            "",
            "| measure | seconds |",
            "|---|---:|",
            f"| the press waited | {r['press_wait_s']:.1f} |",
            f"| the warm's remaining time for the map, from the press | {r['warm_remaining_s']:.1f} |",
            f"| the warm's map step in all | {r['warm_map_step_s']:.1f} |",
            f"| a press once it is cached (reading and drawing) | {r['draw_from_cache_s']:.1f} |",
            "",
            f"Projections computed: {r['projections_computed']} for {len(r['spaces'])} space(s) (one each: the press "
            f"computed none); the press's panels from the warm's cache: {r['press_from_cache']}.",
            "",
            f"The tab's note at the press: {r['tab_note_at_press'] or '(none)'}",
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.map_during_warm", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="the map's model (default: the one the tab opens on)")
    parser.add_argument("--press-at", type=float, default=0.15, help="the map step's progress at the press (0-1)")
    parser.add_argument("--backend", default="torch", choices=("torch", "onnx", "onnx-int8"))
    parser.add_argument("--data-dir", default=None, help="datasets folder (default: the one mlse finds)")
    parser.add_argument("--out", default=None, help="JSON to write (default: results/app/map-during-warm.json)")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args()
    if not 0.0 <= args.press_at < 1.0:
        parser.error(f"--press-at must be in [0, 1), got {args.press_at}")
    out = output_file(args.out, args.quick, ROOT / "results" / "app" / "map-during-warm.json")
    scratch = Path(tempfile.mkdtemp(prefix="mlse-map-during-warm-"))
    saved = os.environ.get("MLSE_CACHE")
    try:
        os.environ["MLSE_CACHE"] = str(scratch_cache(scratch))
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        model = args.model
        if model is None:
            from mlse.serving.app_state import AppState
            from mlse.serving.warm_plan import tab_openings

            model = QUICK_MODEL if args.quick else tab_openings(AppState(data_dir=args.data_dir))["map"]
        report = {
            "command": "python -m benchmarks.map_during_warm " + " ".join(sys.argv[1:]),
            "machine": machine(),
            "result": measure(model, args.press_at, args.data_dir, args.backend, args.quick),
        }
    finally:
        if saved is None:
            os.environ.pop("MLSE_CACHE", None)
        else:
            os.environ["MLSE_CACHE"] = saved
        shutil.rmtree(scratch, ignore_errors=True)
    result = report["result"]
    # the target: no longer than the warm's remaining time, but for reading its files and drawing (and one poll)
    report["target_met"] = result["press_wait_s"] <= result["warm_remaining_s"] + result["draw_from_cache_s"] + 1.0
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(report, indent=1) + "\n")
    atomic_write_text(out.with_suffix(".md"), markdown(report))
    print(markdown(report))
    print(f"wrote {out} and {out.with_suffix('.md')}")
    return 0 if result["warm_map_state"] == "computed" or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
