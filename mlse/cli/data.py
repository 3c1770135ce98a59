"""``python -m mlse data info|fetch|sample-bitext``: the datasets on this machine.

``fetch`` downloads the app's datasets from the hub (:mod:`mlse.data.fetch`); ``sample-bitext`` rebuilds the shipped
training bitext sample (:mod:`mlse.data.bitext_sample`).
"""

from __future__ import annotations

import argparse
import os

from mlse.data.bitext_sample import build_sample, sample_dir
from mlse.data.fetch import fetch_missing
from mlse.data.flores import flores_languages
from mlse.data.hub_download import download_from_hub
from mlse.data.layout import STS_LANGS
from mlse.data.parallel import parallel_pairs
from mlse.data.paths import resolve_data_dir
from mlse.data.tatoeba import tatoeba_languages
from mlse.data.wmt import wmt_sets
from mlse.errors import MlseError


def add_data_parser(sub) -> None:
    """Register ``data`` on the subcommand parsers of :func:`mlse.cli.main.build_parser`."""
    data = sub.add_parser(
        "data",
        help="show the data directory in use, fetch datasets from the hub, or rebuild the "
        "shipped training bitext sample (sample-bitext)",
    )
    data.add_argument("action", choices=["info", "fetch", "sample-bitext"])
    data.add_argument("--out", default=None, help="sample-bitext: target folder (default: assets/data/finetune-bitext)")
    data.add_argument(
        "--dataset",
        choices=["all", "stsb_multi_mt", "flores200", "tatoeba"],
        default="all",
        help="fetch: one dataset (downloaded again if present), or all (default: those missing)",
    )
    data.add_argument(
        "--to",
        default=os.environ.get("MLSE_DATA") or None,
        help="fetch: target folder (default: MLSE_DATA; then pass it as --data-dir)",
    )
    data.add_argument("--data-dir", default=None)


def cmd_data(args: argparse.Namespace) -> int:
    if args.action == "fetch":
        if not args.to:
            raise MlseError("data fetch needs --to FOLDER (or MLSE_DATA set)")
        if args.dataset != "all":
            path = download_from_hub(args.dataset, args.to)
            print(f"wrote {args.dataset} to {path}; use --data-dir {path}")
            return 0
        failed = {key: why for key, why in fetch_missing(args.to).items() if why}
        if failed:
            raise MlseError("not fetched: " + "; ".join(f"{key} ({why})" for key, why in failed.items()))
        print(f"the app's datasets are in {args.to}; use --data-dir {args.to}")
        return 0
    if args.action == "sample-bitext":
        out = args.out or str(sample_dir())
        command = " ".join(["python -m mlse data sample-bitext", *(["--out", args.out] if args.out else [])])
        manifest = build_sample(args.data_dir, out, command=command)
        print(
            f"wrote {sum(v['shipped'] for v in manifest['pairs'].values()):,} pairs of {len(manifest['pairs'])} "
            f"language pairs ({manifest['total_bytes']:,} bytes) to {out}"
        )
        return 0
    root = resolve_data_dir(args.data_dir)
    print(f"data directory: {root}")
    print(f"STS Multi MT languages: {', '.join(STS_LANGS)}")
    print(f"Tatoeba (LASER) languages: {len(tatoeba_languages(root))}")
    print(f"Tatoeba-Challenge parallel pairs: {', '.join(parallel_pairs(root))}")
    print(f"FLORES-200 devtest: {', '.join(flores_languages(root))}")
    print("WMT news tests: " + ", ".join(f"{y} {p}" for y, p in wmt_sets(root)))
    return 0
