"""First result of every tab, as a visitor meets it: headless Chromium on a freshly started ``python app.py``.

    python -m benchmarks.first_result [--backend torch] [--mode cold|warm|both] [--tabs score,map,...]
                                      [--runs-dir DIR] [--out results/app/first-result-<backend>.json] [--quick]

For each mode the app is started afresh (the real entry point, on a free loopback port, offline):

* ``cold``: an empty embedding cache (``MLSE_CACHE``), as on a fresh clone or a new Space;
* ``warm``: a cache filled beforehand by ``python -m mlse warm --backend B`` in its own process (its time is recorded).

Chromium opens the page (time until the page is served and until the first tab is drawn), then for each tab in page
order clicks the tab, presses its main button with the defaults (Score a pair gets the flute pair typed in: empty
sentences are not scored) and times until the result is drawn: the result element (the table's first row, a plot) is
on screen and every status indicator Gradio showed for the press is gone. Fine-tune has no answer to wait for: its
time is from clicking the tab until its Start button is drawn. While waiting, the page is sampled every ~0.5 s for
the progress Gradio shows (its status text, ``gr.Progress`` descriptions): whether one was visible throughout, the
longest gap without one, and the messages seen. After the pass, the resident memory of the app's process tree.

``--quick``: minilm-en only (the other ticked models are unticked in the page; ``warm --models minilm-en``), the
Score and Results tabs, no datasets (an empty ``MLSE_DATA``; those two tabs need none), no warm start or data fetch
inside the app (``MLSE_WARM=0``, ``MLSE_FETCH=0``), written to a temporary folder unless ``--out`` is given.

Writes the JSON and a Markdown table next to it (same stem) with the targets: warm <= 3 s per tab, cold
<= 60 s with progress throughout, RSS <= 1.2 GB. Times move with the machine's load: the JSON records the CPU, its
ISA flags and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks._first_result_report import TARGETS, markdown, verdict
from benchmarks.common import QUICK_HELP, app_env, free_port, machine, output_file, stop_app, wait_for_page
from mlse.atomic import atomic_write_text
from mlse.data.portable import portable_record
from mlse.serving.procmem import memory_mb
from tests.browser import TABS, click, fill_textbox, missing_browser, open_app, open_tab, start_chromium

ROOT = Path(__file__).resolve().parents[1]
SENTENCES = ("A man is playing a flute.", "Un homme joue de la flûte.")
QUICK_MODEL = "minilm-en"
QUICK_TABS = ("score", "results")
RESULT_TIMEOUT_S = 600  # a cold tab past 60 s misses its target; past this it is reported as never answering
WARM_TIMEOUT_S = 3600  # python -m mlse warm for every default model, on a busy 2-core machine
SAMPLE_EVERY_S = 0.5
ROW = "//*[@role='row'][*[@role='gridcell']]"  # a drawn table row (Gradio 6 draws rows as an ARIA grid)
PLOT = "//div[contains(@class, 'js-plotly-plot')]"  # a drawn Plotly figure
ON_OPEN_WAIT_S = 8.0  # how long a tab that draws on opening is given before its button is pressed anyway


@dataclass(frozen=True)
class Step:
    slug: str  # tests/browser.py's TABS slug
    result: str  # XPath of an element only the answer draws (only the open tab's elements are displayed)
    press: bool = True  # False: nothing to press, the tab's first view is its result
    on_open: bool = False  # True: the tab may draw its result when opened (warm); how soon is recorded before pressing


STEPS = (
    Step("score", ROW),
    Step("map", PLOT, on_open=True),
    Step("tatoeba", ROW),
    Step("gold", PLOT),
    Step("finetune", "//button[normalize-space()='Start']", press=False),
    Step("results", ROW),
)

# Gradio shows a status tracker on each output while an event runs (class "hide" when idle). The observer notes that
# one was shown after the press, so a fast answer is not mistaken for no answer and a slow one not for a finished one.
WATCH_JS = """
window.__firstResult = {shown: false};
const note = (t) => { if (t.getAttribute && t.getAttribute('data-testid') === 'status-tracker'
                          && !t.classList.contains('hide')) window.__firstResult.shown = true; };
if (window.__firstResultObserver) window.__firstResultObserver.disconnect();
window.__firstResultObserver = new MutationObserver((records) => { for (const r of records) { note(r.target);
  for (const n of r.addedNodes || []) if (n.querySelectorAll) n.querySelectorAll('[data-testid=status-tracker]')
  .forEach(note); } });
window.__firstResultObserver.observe(document.body, {attributes: true, attributeFilter: ['class'], childList: true,
                                                     subtree: true});
"""
STATUS_JS = """
const busy = [...document.querySelectorAll('[data-testid=status-tracker]')]
  .filter((t) => !t.classList.contains('hide') && t.offsetParent !== null);
const text = (t, css) => [...t.querySelectorAll(css)].map((e) => e.innerText.trim()).filter((x) => x).join(' ');
return {shown: !!(window.__firstResult && window.__firstResult.shown), busy: busy.length,
        timer: busy.map((t) => text(t, '.progress-text')).filter((x) => x),
        described: busy.map((t) => text(t, '.progress-level')).filter((x) => x)};
"""


def tree_rss_mb(pid: int) -> dict:
    """Resident memory of the app and its child processes (MiB), and the app's own peak (VmHWM)."""
    own = memory_mb(pid)
    try:
        import psutil

        proc = psutil.Process(pid)
        members = [proc, *proc.children(recursive=True)]
        total = sum(p.memory_info().rss for p in members if p.is_running()) / 2**20
        return {
            "rss_mb": round(total, 1),
            "processes": len(members),
            "app_rss_mb": own["rss_mb"],
            "app_peak_rss_mb": own["peak_rss_mb"],
        }
    except ImportError:  # psutil comes with the requirements; without it, the app process alone
        return {
            "rss_mb": own["rss_mb"],
            "processes": 1,
            "app_rss_mb": own["rss_mb"],
            "app_peak_rss_mb": own["peak_rss_mb"],
        }


def keep_only_models(driver, keep: str) -> list[str]:
    """In the first checkbox group labelled "Models" (Score a pair's), untick every model but ``keep`` (and tick it);
    its checkboxes read "name · kind"."""
    from tests.browser import visible

    group = (
        "(//*[normalize-space(text())='Models'])[1]/ancestor::*[contains(concat(' ', normalize-space(@class), "
        "' '), ' block ')][1]//label[input[@type='checkbox']][contains(normalize-space(), ' · ')]"
    )
    unticked = []
    for label in visible(driver, group):
        name = label.text.split(" · ")[0].strip()
        if label.find_element("xpath", "./input").is_selected() != (name == keep):
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", label)
            label.click()
            unticked += [name] if name != keep else []
    return unticked


def drawn_within(driver, xpath: str, started: float, limit_s: float) -> float | None:
    """Seconds from ``started`` until ``xpath`` is drawn without a press, or None within ``limit_s``."""
    from tests.browser import visible

    while time.perf_counter() - started < limit_s:
        if visible(driver, xpath):
            return round(time.perf_counter() - started, 2)
        time.sleep(0.1)
    return None


def wait_for_result(driver, step: Step, started: float) -> dict:
    """Poll until ``step``'s answer is drawn; sample the progress shown meanwhile. Times are from ``started``."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    from tests.browser import visible

    samples, next_sample = [], 0.0
    while True:
        elapsed = time.perf_counter() - started
        if elapsed > RESULT_TIMEOUT_S:
            return {"seconds": None, "error": f"no result within {RESULT_TIMEOUT_S} s", "samples": samples}
        try:
            status = driver.execute_script(STATUS_JS) if step.press else {"shown": True, "busy": 0}
            drawn = visible(driver, step.result)
            text = drawn[0].text.strip()[:160] if drawn else ""
        except (StaleElementReferenceException, WebDriverException):  # Gradio re-rendered mid-read: look again
            drawn, text = [], ""
        elapsed = time.perf_counter() - started
        if drawn and status["shown"] and not status["busy"]:
            return {"seconds": round(elapsed, 2), "result": text, "samples": samples}
        if step.press and elapsed >= next_sample:  # still waiting: what does the page show meanwhile?
            samples.append(
                {
                    "t": round(elapsed, 2),
                    "busy": status.get("busy", 0),
                    "timer": status.get("timer", []),
                    "described": status.get("described", []),
                }
            )
            next_sample = elapsed + SAMPLE_EVERY_S
        time.sleep(0.1)


def progress_summary(samples: list[dict], seconds: float | None) -> dict:
    """Was a progress message on screen throughout the wait? The first 0.5 s is grace (the press takes a moment)."""
    waited = [s for s in samples if s["t"] >= 0.5]
    with_text = [bool(s["timer"] or s["described"]) for s in waited]
    gap, longest, last = 0.0, 0.0, 0.5
    for s, shown in zip(waited, with_text):
        gap = 0.0 if shown else gap + (s["t"] - last)
        longest, last = max(longest, gap), s["t"]
    messages, timeline = [], []  # gr.Progress descriptions, else the status text without its clock ("processing |")
    for s in waited:
        shown = [m[:160] for m in s["described"] or [t.split("|")[0].strip() for t in s["timer"]] if m]
        messages += [m for m in shown if m not in messages]
        if not timeline or timeline[-1][1:] != [s.get("busy", 0), shown[:1]]:
            timeline.append([s["t"], s.get("busy", 0), shown[:1]])  # when what is on screen changes: t, trackers, text

    def share(values: list) -> float | None:
        return round(sum(map(bool, values)) / len(values), 2) if values else None

    return {
        "samples": len(waited),
        "visible_share": share(with_text),  # a status text or progress description on screen
        "described_share": share([s["described"] for s in waited]),  # a gr.Progress description
        "indicator_share": share([s.get("busy", 0) for s in waited]),  # any status indicator, text or not
        "longest_gap_s": round(longest, 2),
        "throughout": all(with_text) if waited else seconds is not None,
        "messages": messages[:12],
        "timeline": timeline if len(timeline) <= 200 else timeline[:100] + timeline[-100:],
    }


def run_tab(driver, step: Step, quick: bool) -> dict:
    tab = next(t for t in TABS if t.slug == step.slug)
    started = time.perf_counter()
    open_tab(driver, tab.name)
    out = {"tab": tab.name, "button": tab.marker if step.press else None}
    if not step.press:
        waited = wait_for_result(driver, step, started)
        print(f"  {tab.name}: drawn in {waited['seconds']} s {waited.get('error') or ''}", flush=True)
        return out | {
            "tab_open_s": waited["seconds"],
            "seconds": waited["seconds"],
            "result": waited.get("result"),
            "error": waited.get("error"),
        }
    from tests.browser import button

    button(driver, tab.marker, timeout=60)
    out["tab_open_s"] = round(time.perf_counter() - started, 2)
    if step.on_open:
        out["drawn_on_open_s"] = drawn_within(driver, step.result, started, ON_OPEN_WAIT_S)
    if step.slug == "score":
        if quick:
            out["unticked"] = keep_only_models(driver, QUICK_MODEL)
        fill_textbox(driver, "Sentence 1", SENTENCES[0])
        fill_textbox(driver, "Sentence 2", SENTENCES[1])
        time.sleep(1.0)  # let the language detection of the typed text settle: it is not part of the press
    driver.execute_script(WATCH_JS)
    pressed = time.perf_counter()
    click(driver, tab.marker)
    waited = wait_for_result(driver, step, pressed)
    out |= {
        "seconds": waited["seconds"],
        "result": waited.get("result"),
        "error": waited.get("error"),
        "progress": progress_summary(waited["samples"], waited["seconds"]),
    }
    print(
        f"  {tab.name}: {out['seconds']} s (tab drawn in {out['tab_open_s']} s); progress "
        f"{out['progress']['visible_share']} of the wait {out.get('error') or ''}",
        flush=True,
    )
    return out


def warm_cache(env: dict, backend: str, quick: bool) -> dict:
    """``python -m mlse warm`` into the mode's cache, in its own process; its time and last lines."""
    models = ["--models", QUICK_MODEL] if quick else []
    command = [sys.executable, "-m", "mlse", "warm", "--backend", backend, *models]
    log_path = Path(env["MLSE_CACHE"]) / "warm.log"
    print(f"  {' '.join(['python', *command[1:]])} (log {log_path})", flush=True)
    started = time.perf_counter()
    with log_path.open("w") as log:
        try:
            rc = subprocess.run(
                command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=WARM_TIMEOUT_S
            ).returncode
        except subprocess.TimeoutExpired:
            rc = None
    tail = log_path.read_text(errors="replace").strip().splitlines()[-4:]
    tail += [] if rc is not None else [f"stopped after {WARM_TIMEOUT_S} s"]
    print(f"  warm: rc {rc} in {time.perf_counter() - started:.0f} s: {tail[-1:]}", flush=True)
    return {
        "command": " ".join(["python", *command[1:]]),
        "rc": rc,
        "seconds": round(time.perf_counter() - started, 1),
        "tail": tail,
    }


def measure_mode(mode: str, args) -> dict:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    env = app_env(port, args.runs_dir, args.backend, cache=tempfile.mkdtemp(prefix=f"mlse-first-result-{mode}-"))
    if args.quick:  # the Score and Results tabs need no dataset: nothing to fetch, no warm start of the other tabs
        env |= {"MLSE_DATA": tempfile.mkdtemp(prefix="mlse-first-result-nodata-"), "MLSE_FETCH": "0", "MLSE_WARM": "0"}
    result: dict = {"mode": mode, "cache": env["MLSE_CACHE"]}
    if mode == "warm":
        result["warm"] = warm_cache(env, args.backend, args.quick)
        if result["warm"]["rc"] != 0:
            return result | {"error": "python -m mlse warm failed: " + " / ".join(result["warm"]["tail"])}
    log_path = Path(env["MLSE_CACHE"]) / "app.log"
    print(f"{mode}: starting python app.py (log {log_path})", flush=True)
    with log_path.open("w") as log:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "app.py", "--backend", args.backend],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    driver = None
    try:
        result["page_served_s"] = round(wait_for_page(url, proc, started), 2)
        result["rss_page_served"] = tree_rss_mb(proc.pid)
        driver = start_chromium()
        open_app(driver, url)
        result["page_drawn_s"] = round(time.perf_counter() - started, 2)
        print(f"  page served in {result['page_served_s']} s, drawn in {result['page_drawn_s']} s", flush=True)
        result["tabs"] = {step.slug: run_tab(driver, step, args.quick) for step in STEPS if step.slug in args.tabs}
        result["rss_after_pass"] = tree_rss_mb(proc.pid)
    finally:
        if driver is not None:
            driver.quit()
        stop_app(proc)
    result["app_log_tail"] = log_path.read_text(errors="replace").strip().splitlines()[-5:]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.first_result", description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default=os.environ.get("MLSE_BACKEND", "torch"))
    parser.add_argument("--mode", choices=("cold", "warm", "both"), default="both")
    parser.add_argument("--tabs", default=None, help="comma-separated: " + ",".join(s.slug for s in STEPS))
    parser.add_argument("--runs-dir", type=Path, default=None, help="MLSE_RUNS of the app (default: a new empty one)")
    parser.add_argument("--out", default=None, help="JSON file (default results/app/first-result-<backend>.json)")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args()
    reason = missing_browser()
    if reason:
        raise SystemExit(reason)
    known = [s.slug for s in STEPS]
    args.tabs = args.tabs.split(",") if args.tabs else list(QUICK_TABS if args.quick else known)
    unknown = [t for t in args.tabs if t not in known]
    if unknown:
        raise SystemExit(f"unknown tab(s) {', '.join(unknown)}: choose from {', '.join(known)}")
    args.runs_dir = (args.runs_dir or Path(tempfile.mkdtemp(prefix="mlse-first-result-runs-"))).resolve()
    out = output_file(args.out, args.quick, f"results/app/first-result-{args.backend}.json")
    report = {
        "benchmark": "first-result",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "backend": args.backend,
        "command": " ".join(["python", "-m", "benchmarks.first_result", *sys.argv[1:]]),
        "quick": args.quick,
        "machine": machine(),
        "targets": TARGETS,
        "runs_dir": str(args.runs_dir),
        "modes": [],
    }
    for mode in ("cold", "warm") if args.mode == "both" else (args.mode,):
        try:
            report["modes"].append(measure_mode(mode, args))
        except (Exception, SystemExit) as exc:  # the app never served, the browser died: say so, go on
            report["modes"].append({"mode": mode, "error": f"{type(exc).__name__}: {exc}"})
        report["modes"][-1]["targets_met"] = verdict(report["modes"][-1])
    report["load_average_end"] = os.getloadavg()[0]
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(portable_record(report), indent=1, ensure_ascii=False))  # no absolute path
    atomic_write_text(out.with_suffix(".md"), markdown(report) + "\n")
    print(markdown(report))
    print(f"wrote {out} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
