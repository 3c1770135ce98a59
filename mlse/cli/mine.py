"""``python -m mlse mine SRC TGT --model M --out FILE``: bitext mining by LASER's ratio margin
(:func:`mlse.scale.mine.mine_files`), writing ``score<TAB>source<TAB>target`` best first."""

from __future__ import annotations

import argparse
import sys

from mlse.cli.scale_args import add_engine_arguments, add_model_backend, engine_options
from mlse.scale.corpus import CORPUS_FORMATS
from mlse.scale.mine import APPROXIMATE, EXACT_MAX, INDEX_CHOICES, NPROBE, mine_files
from mlse.scale.search import REFINE


def add_mine_parser(sub) -> None:
    """Register ``mine`` on the subcommand parsers of :func:`mlse.cli.main.build_parser`."""
    mi = sub.add_parser(
        "mine",
        help="mine translation pairs between two corpora (LASER ratio margin, greedy 1:1)",
        description="Embed SRC and TGT, find each text's best counterpart by ratio margin both ways, keep the "
        "union 1:1 and write score, source, target (TSV) best first.",
    )
    mi.add_argument("src", help="source texts (.txt one per line, .tsv/.csv/.jsonl, .parquet)")
    mi.add_argument("tgt", help="target texts (same formats)")
    add_model_backend(mi)
    mi.add_argument("--out", required=True, help="TSV to write: score<TAB>source<TAB>target")
    mi.add_argument("--threshold", type=float, default=None, help="keep pairs scoring at least this (e.g. 1.06)")
    mi.add_argument("-k", type=int, default=4, help="margin neighbourhood size (default 4)")
    mi.add_argument("--candidates", type=int, default=16, help="cosine neighbours scored by margin (default 16)")
    mi.add_argument(
        "--exact-max",
        type=int,
        default=EXACT_MAX,
        help=f"--index auto: exact search up to this many texts per side (default {EXACT_MAX:,})",
    )
    mi.add_argument(
        "--index",
        choices=INDEX_CHOICES,
        default="auto",
        help=f"neighbour search: exact (faiss flat), ivf, ivf-pq (IVF lists, 4-bit PQ, fp16 re-scoring); auto: exact "
        f"up to --exact-max texts a side, {APPROXIMATE} beyond (default auto)",
    )
    mi.add_argument("--nprobe", type=int, default=NPROBE, help=f"IVF lists visited per query (default {NPROBE})")
    mi.add_argument(
        "--refine",
        type=int,
        default=REFINE,
        help=f"ivf-pq: candidates re-scored on fp16 vectors, times --candidates (default {REFINE})",
    )
    mi.add_argument("--format", choices=CORPUS_FORMATS, default=None, help="how to read SRC and TGT")
    mi.add_argument("--shard-rows", type=int, default=10_000, help="texts per shard (embedded and searched as one)")
    mi.add_argument("--keep-work", action="store_true", help="keep the embeddings (FILE.work/) after mining")
    add_engine_arguments(mi)


def cmd_mine(args: argparse.Namespace) -> int:
    summary = mine_files(
        args.src,
        args.tgt,
        args.model,
        args.out,
        backend=args.backend,
        k=args.k,
        candidates=args.candidates,
        threshold=args.threshold,
        index=args.index,
        exact_max=args.exact_max,
        nprobe=args.nprobe,
        refine=args.refine,
        shard_rows=args.shard_rows,
        batch_tokens=args.batch_tokens,
        format=args.format,
        options=engine_options(args),
        keep_work=args.keep_work,
    )
    print(
        f"wrote {args.out}: {summary['pairs']:,} pairs (of {summary['candidates']:,} 1:1 candidates; "
        f"{summary['src_rows']:,} x {summary['tgt_rows']:,}, {summary['search']} search); "
        f"{summary['bad_rows']:,} bad row(s)",
        file=sys.stderr,
    )
    return 0
