"""``python -m mlse embed CORPUS --model M --out DIR``: every text of a corpus -> sharded embeddings (Parquet or
NumPy shards with an ``id`` column, fp32 or fp16) and a manifest, in this process or on Ray
(:func:`mlse.scale.embed.embed_corpus`). ``--resume`` finishes a killed job in the same folder."""

from __future__ import annotations

import argparse
import sys

from mlse.cli.scale_args import add_engine_arguments, add_model_backend, engine_options
from mlse.scale.corpus import CORPUS_FORMATS
from mlse.scale.embed import DEFAULT_SHARD_ROWS, DTYPES, embed_corpus
from mlse.scale.shards import SHARD_FORMATS


def add_embed_parser(sub) -> None:
    """Register ``embed`` on the subcommand parsers of :func:`mlse.cli.main.build_parser`."""
    em = sub.add_parser(
        "embed",
        help="embed every text of a corpus into sharded, resumable embedding files",
        description="Embed CORPUS (TXT one text per line, TSV/CSV/JSONL with a sentence or text column, or Parquet "
        "with a text column) into DIR: shards with an id column and the embeddings, and manifest.json.",
    )
    em.add_argument("corpus", help="texts: .txt (one per line), .tsv/.csv/.jsonl, or .parquet")
    add_model_backend(em)
    em.add_argument("--out", required=True, help="output folder (created; refused if it holds another job)")
    em.add_argument("--format", choices=CORPUS_FORMATS, default=None, help="how to read CORPUS (default: suffix)")
    em.add_argument("--dtype", choices=list(DTYPES), default="fp32", help="stored precision (default fp32)")
    em.add_argument("--shard-format", choices=SHARD_FORMATS, default="parquet", help="parquet or npy (.npz)")
    em.add_argument("--shard-rows", type=int, default=DEFAULT_SHARD_ROWS, help="texts per shard")
    em.add_argument("--resume", action="store_true", help="finish the job whose shards DIR already holds")
    add_engine_arguments(em)


def cmd_embed(args: argparse.Namespace) -> int:
    manifest = embed_corpus(
        args.corpus,
        args.model,
        args.out,
        backend=args.backend,
        dtype=args.dtype,
        shard_format=args.shard_format,
        shard_rows=args.shard_rows,
        batch_tokens=args.batch_tokens,
        format=args.format,
        resume=args.resume,
        options=engine_options(args),
    )
    progress = manifest["progress"]
    print(
        f"wrote {args.out}: {manifest['rows_total']:,} rows in {len(manifest['shards'])} shard(s), dim "
        f"{manifest.get('dim')}, {manifest['dtype']}, model {manifest.get('model_identity')}; "
        f"{manifest['bad_rows']:,} bad row(s); {progress['rows_per_s']:,.0f} rows/s",
        file=sys.stderr,
    )
    return 0
