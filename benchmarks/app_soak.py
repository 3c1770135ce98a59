"""Does the app's memory come back? RSS of ``python app.py`` sampled every second through a day's use in miniature.

    python -m benchmarks.app_soak [--backend onnx-int8] [--clients 20] [--requests 50] [--finetunes 3]
                                  [--finetune-steps 20] [--out results/app/app-soak.json]
    python -m benchmarks.app_soak --quick   # minilm-en on torch: a couple of calls, one tiny fine-tune

Phases, in order, each labelled in the samples: ``start`` (the page served), ``tabs`` (every tab's main API endpoint
called once with the page's default inputs: score_pair, language_map, tatoeba_errors, predicted_vs_gold,
results_refresh), ``load-1`` (``--clients`` x ``--requests`` Score-a-pair requests, as in benchmarks/app_load.py),
``finetunes`` (``--finetunes`` tiny fine-tunes started through the API one after another, each waited for until its
run folder appears; the jobs run in a child process, mlse/train/child_jobs.py), ``load-2`` (the same load again, on new
pairs), ``rest`` (a few idle seconds). A sampler thread reads the app's RSS (``VmRSS``) every second.

Reported: peak RSS, final RSS, and the RSS right after ``load-1``; targets: peak <= 1.5 GB and final within
100 MB of the RSS after ``load-1``. Writes the samples and summary to ``--out`` and a plotly HTML plot beside it.
``--quick`` runs every phase once, small (:data:`QUICK`; of the tabs only Score a pair and Results; the fine-tune on
``minilm-en``; the app without its warm start, ``MLSE_WARM=0``), into a temporary folder unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.common import (
    QUICK_HELP,
    app_env,
    default_models,
    free_port,
    machine,
    output_file,
    prepare_models,
    run_round,
    start_app,
    stop_app,
    test_pairs,
    wait_for_page,
)
from mlse.atomic import atomic_write_text
from mlse.serving.procmem import memory_mb

# endpoint -> inputs that have no default on the page (the Results tab's free-text filter starts empty, not unset)
TAB_ENDPOINTS = {
    "/language_map": {},
    "/tatoeba_errors": {},
    "/predicted_vs_gold": {},
    "/results_refresh": {"key_contains": ""},
}
TARGET_PEAK_MB, TARGET_RETURN_MB = 1.5e9 / 2**20, 100e6 / 2**20  # 1.5 GB and 100 MB, in MiB as VmRSS is read
FINETUNE_TIMEOUT_S = 1800
REST_S = 10
QUICK = {"clients": 2, "requests": 2, "finetunes": 1, "finetune_steps": 2, "backend": "torch", "rest_s": 1}


class RssSampler:
    """Samples the app's RSS once a second in a thread, labelled with the current phase."""

    def __init__(self, pid: int, every_s: float = 1.0):
        self.pid, self.every_s, self.phase = pid, every_s, "start"
        self.samples: list[dict] = []
        self.started = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every_s)

    def sample(self) -> dict:
        try:
            rss = memory_mb(self.pid)["rss_mb"]
        except OSError:  # the app has exited
            rss = None
        record = {"t_s": round(time.perf_counter() - self.started, 1), "rss_mb": rss, "phase": self.phase}
        self.samples.append(record)
        return record

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def open_tabs(client, models: list[str], pair: tuple[str, str], endpoints: dict = TAB_ENDPOINTS) -> dict:
    """Each tab's main endpoint once, inputs left at the page's defaults (Score a pair: one pair, every model)."""
    seconds = {}
    t = time.perf_counter()
    client.predict(*pair, models, "auto", "auto", None, api_name="/score_pair")
    seconds["/score_pair"] = round(time.perf_counter() - t, 1)
    for endpoint, inputs in endpoints.items():
        t = time.perf_counter()
        try:
            client.predict(**inputs, api_name=endpoint)
            seconds[endpoint] = round(time.perf_counter() - t, 1)
        except Exception as exc:  # noqa: BLE001 -- a tab without its data still counts as opened; say why
            seconds[endpoint] = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
        print(f"  {endpoint}: {seconds[endpoint]}")
    return seconds


def run_finetunes(client, runs_dir: Path, count: int, steps: int, student: str | None = None) -> list[dict]:
    """``count`` tiny fine-tunes through the API, one at a time, each waited for until its run folder is listed.
    ``student``: student and teacher (default: the page's, the preferred backbone)."""
    os.environ["MLSE_RUNS"] = str(runs_dir)
    from mlse.encoders.catalogue import list_runs

    done = []
    for i in range(count):
        name = f"soak-{os.getpid()}-{i}"
        t = time.perf_counter()
        models = {"model": student, "teacher": student} if student else {}
        status = client.predict(
            language_pairs=["en-de"],
            max_pairs=200,
            budget_minutes=5,
            run_name=name,
            overwrite=True,
            max_steps=steps,
            eval_every_steps=steps,
            dev_max_pairs=50,
            learning_rate=None,
            max_epochs=None,
            **models,
            api_name="/finetune_start",
        )
        print(f"  fine-tune {name}: {str(status)[:160]}")
        while not any(spec.name.endswith(name) for spec in list_runs()):
            if time.perf_counter() - t > FINETUNE_TIMEOUT_S:
                raise SystemExit(f"fine-tune {name} did not finish within {FINETUNE_TIMEOUT_S} s: {status}")
            time.sleep(2)
        done.append({"name": name, "seconds": round(time.perf_counter() - t, 1)})
    return done


def summarise(samples: list[dict]) -> dict:
    rss = [s["rss_mb"] for s in samples if s["rss_mb"] is not None]
    after_load1 = [s["rss_mb"] for s in samples if s["phase"] == "load-1" and s["rss_mb"] is not None]
    peak, final = max(rss), rss[-1]
    reference = after_load1[-1] if after_load1 else None
    summary = {
        "peak_rss_mb": peak,
        "final_rss_mb": final,
        "rss_after_load1_mb": reference,
        "start_rss_mb": rss[0],
        "target_peak_mb": round(TARGET_PEAK_MB, 1),
        "target_return_mb": round(TARGET_RETURN_MB, 1),
    }
    summary["peak_met"] = peak <= TARGET_PEAK_MB
    summary["return_met"] = reference is not None and abs(final - reference) <= TARGET_RETURN_MB
    return summary


def write_plot(samples: list[dict], path: Path, title: str) -> None:
    import plotly.graph_objects as go

    fig = go.Figure()
    for phase in dict.fromkeys(s["phase"] for s in samples):
        points = [s for s in samples if s["phase"] == phase and s["rss_mb"] is not None]
        fig.add_trace(
            go.Scatter(
                x=[p["t_s"] for p in points],
                y=[p["rss_mb"] for p in points],
                mode="lines+markers",
                name=phase,
                marker={"size": 3},
            )
        )
    fig.add_hline(y=TARGET_PEAK_MB, line_dash="dash", annotation_text="target peak (1.5 GB)")
    fig.update_layout(title=title, xaxis_title="seconds since start", yaxis_title="RSS (MiB)")
    atomic_write_text(path, fig.to_html(include_plotlyjs="cdn", full_html=True))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.app_soak", description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default=os.environ.get("MLSE_BACKEND", "onnx-int8"))
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--finetunes", type=int, default=3)
    parser.add_argument("--finetune-steps", type=int, default=20)
    parser.add_argument("--models", nargs="+", default=None, help="default: the offline defaults that load here")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument(
        "--out", type=Path, default=None, help="default results/app/app-soak.json (--quick: a temporary folder)"
    )
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    args.rest_s = REST_S
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
        args.models = args.models or ["minilm-en"]
        os.environ["MLSE_WARM"] = "0"  # the app's warm start would prepare every model and tab: minutes, not seconds
    args.out = output_file(args.out, args.quick, "results/app/app-soak.json")
    tabs = {"/results_refresh": TAB_ENDPOINTS["/results_refresh"]} if args.quick else TAB_ENDPOINTS

    from gradio_client import Client

    runs_dir = Path(tempfile.mkdtemp(prefix="mlse-soak-runs-"))  # the fine-tunes' runs: never the user's runs/
    models = args.models or default_models(runs_dir)
    per_round = args.clients * args.requests
    pairs = test_pairs(1 + 2 * per_round, args.data_dir)
    port = free_port()
    env = app_env(port, runs_dir, args.backend, cache=tempfile.mkdtemp(prefix="mlse-soak-cache-"))
    export_s = prepare_models(models, env) if args.backend != "torch" else None
    started = time.perf_counter()
    proc = start_app(env)
    phases = {}
    try:
        wait_for_page(f"http://127.0.0.1:{port}/", proc, started)
        with RssSampler(proc.pid) as sampler:
            client = Client(f"http://127.0.0.1:{port}/", verbose=False)
            sampler.phase = "tabs"
            phases["tabs"] = open_tabs(client, models, pairs[0], tabs)
            sampler.phase = "load-1"
            phases["load-1"] = run_round(port, proc.pid, args.clients, pairs[1 : 1 + per_round], models, args.requests)
            sampler.sample()  # the reference point: RSS right after the first load round
            sampler.phase = "finetunes"
            student = models[0] if args.quick else None  # --quick: minilm-en, not the page's me5-small
            phases["finetunes"] = run_finetunes(client, runs_dir, args.finetunes, args.finetune_steps, student)
            sampler.phase = "load-2"
            phases["load-2"] = run_round(port, proc.pid, args.clients, pairs[1 + per_round :], models, args.requests)
            sampler.phase = "rest"
            time.sleep(args.rest_s)
            peak_hwm = memory_mb(proc.pid)["peak_rss_mb"]
    finally:
        stop_app(proc)
        for folder in (runs_dir, env["MLSE_CACHE"]):  # the fine-tuned runs and the fresh cache: of no further use
            shutil.rmtree(folder, ignore_errors=True)
    summary = {**summarise(sampler.samples), "peak_vmhwm_mb": peak_hwm}
    result = {
        "backend": args.backend,
        "quick": args.quick,
        "models": models,
        **machine(),
        "onnx_export_s": export_s,
        "clients": args.clients,
        "requests_per_client": args.requests,
        "finetunes": args.finetunes,
        "summary": summary,
        "phases": phases,
        "samples": sampler.samples,
    }
    atomic_write_text(args.out, json.dumps(result, indent=1))
    plot = args.out.with_suffix(".html")
    write_plot(sampler.samples, plot, f"RSS of python app.py ({args.backend}, {', '.join(models)})")
    print(
        f"peak {summary['peak_rss_mb']:.0f} MiB ({'met' if summary['peak_met'] else 'NOT met'}: <= "
        f"{TARGET_PEAK_MB:.0f}), after load-1 {summary['rss_after_load1_mb']} MiB, final "
        f"{summary['final_rss_mb']:.0f} MiB ({'met' if summary['return_met'] else 'NOT met'}: within "
        f"{TARGET_RETURN_MB:.0f})"
    )
    print(f"written: {args.out}, {plot}")


if __name__ == "__main__":
    main()
