"""Many visitors filling the upload folder of a public deployment: does it stay under its cap, and does the app serve?

    python -m benchmarks.upload_quota [--uploads 1000] [--visitors 10] [--size 990000] [--threads 8]
                                      [--out results/security/upload-quota.json]
    python -m benchmarks.upload_quota --quick   # 24 uploads from 3 visitors: proves the script runs

1. Starts ``python app.py --public`` as a Space runs it (``SPACE_ID`` set, so visitors are told apart by the last
   ``X-Forwarded-For`` hop, as behind the Space's proxy; every request goes to 127.0.0.1, the addresses are
   documentation-range text), with an empty upload folder of its own (``GRADIO_TEMP_DIR``).
2. ``--threads`` clients send ``--uploads`` files of ``--size`` bytes to Gradio's upload route, round-robin over
   ``--visitors`` addresses, while a sampler reads the upload folder's size every 20 ms.
3. Then the app must still serve: one pair scored through the JSON route (``minilm-en``) and the page answering.

Reported: HTTP statuses (200 kept, 429 over a visitor's share, 503 folder full, anything else an error), the largest
size the folder reached against the cap (:data:`mlse.serving.upload_folder.PUBLIC_QUOTA`), uploads per second, the
app's resident memory at the end, and the machine (CPU, ISA flags). The target: the folder never over the cap, no
error, the app serving after.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.common import machine, output_file, stop_app, wait_for_page
from benchmarks.common.output import QUICK_HELP
from mlse.serving.http_server import free_port
from mlse.serving.upload_folder import PUBLIC_QUOTA

ROOT = Path(__file__).resolve().parents[1]
VISITORS = [f"198.51.100.{i}" for i in range(1, 255)]  # TEST-NET-2 addresses, sent only as X-Forwarded-For text


def folder_bytes(folder: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def upload(url: str, name: str, data: bytes, visitor: str) -> int:
    """POST one file to Gradio's upload route as ``visitor``; the HTTP status."""
    import httpx  # lazy: only the clients need it

    try:
        answer = httpx.post(
            f"{url}/gradio_api/upload", files={"files": (name, data)}, headers={"x-forwarded-for": visitor}, timeout=120
        )
    except httpx.HTTPError:
        return -1
    return answer.status_code


def flood(url: str, folder: Path, *, uploads: int, visitors: int, size: int, threads: int) -> dict:
    """Send ``uploads`` files of ``size`` bytes from ``visitors`` addresses over ``threads`` clients while sampling
    the folder's size; the statuses, the largest size seen and the rate."""
    peak, stop = [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], folder_bytes(folder))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    who = itertools.cycle(VISITORS[:visitors])
    jobs = [(i, next(who)) for i in range(uploads)]
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:  # every file differs, so none shares another's path
        statuses = list(pool.map(lambda job: upload(url, f"f{job[0]}.tsv", _content(job[0], size), job[1]), jobs))
    seconds = time.perf_counter() - started
    stop.set()
    sampler.join()
    peak[0] = max(peak[0], folder_bytes(folder))
    counts = {str(code): statuses.count(code) for code in sorted(set(statuses))}
    return {"statuses": counts, "peak_bytes": peak[0], "seconds": round(seconds, 2), "uploads_per_s": uploads / seconds}


def _content(i: int, size: int) -> bytes:
    head = f"sentence1\tsentence2\nfile {i}\tDatei {i}\n".encode()
    return head + b"x" * max(0, size - len(head))


def serves(url: str) -> bool:
    """The app still scores a pair through the JSON route and serves its page."""
    body = json.dumps({"sentence1": "A dog runs.", "sentence2": "Ein Hund rennt.", "models": ["minilm-en"]}).encode()
    request = urllib.request.Request(f"{url}/api/score", body, {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            scored = "scores" in json.loads(answer.read())
        with urllib.request.urlopen(f"{url}/", timeout=30) as page:
            return scored and page.status == 200
    except OSError:
        return False


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.upload_quota", description=__doc__.split("\n")[0])
    parser.add_argument("--uploads", type=int, default=1000)
    parser.add_argument("--visitors", type=int, default=10)
    parser.add_argument("--size", type=int, default=990_000, help="bytes per file (public per-file cap: 1,000,000)")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--out", default=None)
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    if args.quick:
        args.uploads, args.visitors, args.threads = 24, 3, 4
    out = output_file(args.out, args.quick, "results/security/upload-quota.json")

    work = Path(tempfile.mkdtemp(prefix="mlse-upload-quota-"))
    folder = work / "uploads"
    port = free_port()
    env = {
        **os.environ,
        "GRADIO_TEMP_DIR": str(folder),
        "MLSE_RUNS": str(work / "runs"),
        "MLSE_CACHE": str(work / "cache"),
        "HF_HUB_OFFLINE": "1",
        "SPACE_ID": "mlse-bench/upload-quota",
        "GRADIO_ANALYTICS_ENABLED": "False",
    }
    command = [sys.executable, "app.py", "--public", "--no-warm", "--no-fetch", "--port", str(port)]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_page(f"{url}/", proc, time.perf_counter())
        result = flood(url, folder, uploads=args.uploads, visitors=args.visitors, size=args.size, threads=args.threads)
        result |= {"serves_after": serves(url), "app_rss_bytes": rss_bytes(proc.pid)}
    finally:
        stop_app(proc)
    errors = sum(n for code, n in result["statuses"].items() if code not in ("200", "429", "503"))
    report = {
        "command": "python -m benchmarks.upload_quota" + (" --quick" if args.quick else ""),
        "quick": args.quick,
        "uploads": args.uploads,
        "visitors": args.visitors,
        "size": args.size,
        "threads": args.threads,
        "cap_bytes": PUBLIC_QUOTA.total_bytes,
        "visitor_cap_bytes": PUBLIC_QUOTA.client_bytes,
        **result,
        "errors": errors,
        "under_cap": result["peak_bytes"] <= PUBLIC_QUOTA.total_bytes,
        "machine": machine(),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: report[k] for k in ("statuses", "peak_bytes", "cap_bytes", "under_cap", "serves_after")}))
    print(f"wrote {out}")
    return report


if __name__ == "__main__":
    main()
