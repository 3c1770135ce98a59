"""``python -m mlse score FILE``: score every pair of a user's file with one or more models, write a scored CSV.

The file is streamed (:func:`mlse.data.user_files.read_pairs`): every row checked up front, then ``--chunk`` rows at
a time scored by :func:`mlse.api.score_pairs` through the embedding cache and written out, so memory holds one chunk
and a re-run after Ctrl-C encodes only the rest. Output (:func:`mlse.data.scored_file.write_scored`) goes to ``--out``
(written atomically) or stdout; progress and summary to stderr. ``--engine ray`` (or ``auto`` on a large file, or
``--batch-tokens``) runs the chunks through :func:`mlse.scale.score.score_on_engine`: the byte-identical file.
"""

from __future__ import annotations

import argparse
import glob
import logging
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mlse import api
from mlse.atomic import atomic_write_stream
from mlse.cli.args import add_backend_argument, csv_list
from mlse.cli.scale_args import add_engine_arguments, engine_options
from mlse.data.hashing import file_sha256
from mlse.data.records import FORMATS
from mlse.data.scored_file import write_scored
from mlse.data.user_files import ChunkedTable, UserTable, parse_range, read_pairs
from mlse.encoders.catalogue import DEFAULT_MODELS, resolve_model
from mlse.encoders.progress import CacheCounter, ProgressLog
from mlse.errors import MlseError
from mlse.models import load_model
from mlse.scale.embed import report_bad_rows
from mlse.scale.pairs import PairSource
from mlse.scale.score import parts_folder, remove_parts, score_on_engine

PROGRESS_EVERY_S = 5.0  # at most one progress line per this many seconds
INTERRUPTED_EXIT = 130


def add_score_parser(sub) -> None:
    """Register ``score`` on the subcommand parsers of :func:`mlse.cli.main.build_parser`."""
    sc = sub.add_parser(
        "score",
        help="score every sentence pair of a file (TSV, CSV, JSONL) with one or more models",
        description="Score every pair of FILE with each model and write the input's columns, then "
        "'<model> cosine' and '<model> 0-5' per model. A rerun is served by the "
        "embedding cache.",
    )
    sc.add_argument("file", help="pairs file: sentence1, sentence2, optional score (header optional)")
    sc.add_argument(
        "--models",
        type=csv_list,
        default=list(DEFAULT_MODELS),
        help=f"comma-separated models (default {','.join(DEFAULT_MODELS)})",
    )
    sc.add_argument(
        "--out", default=None, help="scored file to write (TSV when it ends in .tsv, else CSV); default: CSV on stdout"
    )
    add_backend_argument(
        sc, help_text="runtime of the models: torch, onnx (fp32) or onnx-int8 (exported once and cached)"
    )
    sc.add_argument(
        "--format",
        choices=[f for f in FORMATS if f != "lines"],
        default=None,
        help="how to read FILE (default: from its suffix, else its content)",
    )
    sc.add_argument(
        "--skip-bad-rows",
        action="store_true",
        help="skip malformed rows (each listed on stderr) instead of stopping at the first",
    )
    sc.add_argument("--gold-range", default=None, help="refuse scores outside LOW:HIGH, e.g. 0:5")
    sc.add_argument(
        "--chunk",
        type=int,
        default=api.CHUNK_PAIRS,
        help=f"pairs encoded per step (default {api.CHUNK_PAIRS}): memory, and how much a Ctrl-C loses",
    )
    add_engine_arguments(sc)


def _read(args) -> ChunkedTable:
    """The pairs file scanned once, every row checked, then read back ``--chunk`` rows at a time (never all at once)."""
    table = read_pairs(
        args.file,
        name=str(args.file),
        format=args.format,
        gold_range=parse_range(args.gold_range),
        bad_rows="skip" if args.skip_bad_rows else "raise",
        chunk_rows=args.chunk,
    )
    report_bad_rows(table.skipped, table.n_skipped, len(table), sys.stderr)
    return table


def _names(names: Sequence[str]) -> list[str]:
    names = list(dict.fromkeys(names))
    if not names:
        raise MlseError("--models names no model; e.g. --models minilm-en")
    for name in names:
        resolve_model(name)  # an unknown name fails before any model loads
    return names


def _job(args) -> dict:
    """What decides the scored file: the parts folder of another job is never reused."""
    keys = ("models", "backend", "chunk", "batch_tokens", "format", "skip_bad_rows", "gold_range")
    return {"command": "score", "input_sha256": file_sha256(args.file)} | {k: getattr(args, k) for k in keys}


def _models(names: Sequence[str], backend: str) -> dict[str, object]:
    names = _names(names)
    # no "Loading weights" bars with carriage returns between the progress lines (read when transformers loads)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    loaded = {}
    for name in names:
        print(f"loading {name} ({backend})", file=sys.stderr, flush=True)
        loaded[name] = load_model(name, backend=backend)
    return loaded


def check_out(out: Path) -> None:
    """Refuse an ``--out`` that cannot be written, before anything loads: its folder (or the nearest existing one
    above it, the folders between are created) must be a folder this process can create a file in."""
    folder = existing = out.parent
    # a dangling link stops the climb: nothing can be created through it
    while not existing.exists() and existing != existing.parent and not existing.is_symlink():
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise MlseError(f"--out {out}: cannot write it: {existing} is a file, not a folder")
    if not existing.exists():
        raise MlseError(f"--out {out}: cannot write it: its folder {folder} cannot be created")
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=f".{out.name}.", suffix=".probe")
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise MlseError(f"--out {out}: cannot write it: cannot create a file in {existing} ({why})") from None
    os.close(fd)
    os.unlink(probe)


class _Summary:
    """What the summary lines need, gathered chunk by chunk: each model's cosines and the gold (8-12 bytes a pair)."""

    def __init__(self, table: ChunkedTable, models: dict[str, object]):
        self.table, self.models = table, models
        self.cosines: dict[str, list[np.ndarray]] = {name: [] for name in models}
        self.gold: list[np.ndarray] = []

    def add(self, chunk: UserTable, scores: dict[str, np.ndarray]) -> None:
        for name in self.models:
            self.cosines[name].append(np.asarray(scores[api.column_name(name, api.COSINE)]))
        if chunk.gold is not None:
            self.gold.append(chunk.gold)

    def lines(self) -> list[str]:
        from mlse.evaluation.sts import sts_metrics  # scipy: only once the scoring is done

        gold = np.concatenate(self.gold) if self.gold else None
        lines = []
        for name, model in self.models.items():
            cos = np.concatenate(self.cosines[name])
            line = f"{name}: mean cosine {float(np.mean(cos)):.3f}"
            if gold is not None and len(gold) >= 2:
                m = sts_metrics(cos, gold, n_boot=0)
                line += (
                    f"; against {self.table.roles['gold']!r}: Pearson {m['pearson']:.2f}, Spearman "
                    f"{m['spearman']:.2f} (x 100, cosine)"
                )
            stats = getattr(model, "stats", None)
            if isinstance(stats, dict) and "encoded" in stats:
                line += f"; encoded {stats['encoded']:,} texts, served {stats['served']:,} from the embedding cache"
            lines.append(line)
        return lines


def cmd_score(args: argparse.Namespace) -> int:
    if args.chunk < 1:
        raise MlseError(f"--chunk must be a positive integer, got {args.chunk}")
    out = Path(args.out) if args.out else None
    if out is not None and out.is_dir():
        raise MlseError(f"--out {args.out}: is a folder, expected a file name such as scored.csv")
    if out is not None and out.exists() and Path(args.file).exists() and out.samefile(args.file):
        raise MlseError(f"--out {args.out} is the input file; write the scores to another file")
    if out is not None:
        check_out(out)  # before the file is read or any model loads
    cache_log = logging.getLogger("mlse.encoders.cache")  # one "encoded N texts" line per chunk is noise here
    level = cache_log.level
    if not getattr(args, "verbose", False):
        cache_log.setLevel(logging.WARNING)
    try:
        return _score(args, out)
    finally:
        cache_log.setLevel(level)


def _score(args: argparse.Namespace, out: Path | None) -> int:
    table = _read(args)
    options = engine_options(args)
    pipeline = options.resolve(len(table)) == "ray" or args.batch_tokens is not None  # mlse.scale's chunk pipeline
    models = {name: None for name in _names(args.models)} if pipeline else _models(args.models, args.backend)
    total = len(table)
    print(
        f"scoring {total:,} pairs with {', '.join(models)} ({args.chunk} pairs per step)", file=sys.stderr, flush=True
    )
    # one progress model (mlse.encoders.progress): the rate counts the rows encoded, not those the cache served
    progress = ProgressLog("scoring", total, every=PROGRESS_EVERY_S)
    counter = CacheCounter(models.values()) if not pipeline else None
    summary = _Summary(table, models)
    started = time.perf_counter()
    parts = parts_folder(out) if pipeline and out is not None else None
    tsv = out is not None and out.suffix.lower() == ".tsv"
    columns: list[str] = []

    def score_into(stream) -> None:
        """Score chunk after chunk, each chunk's rows written to ``stream`` as soon as it is scored, in order."""

        def emit(chunk: UserTable, scores: dict[str, np.ndarray]) -> None:
            try:
                write_scored(chunk, scores, stream, tsv=tsv, header=not columns)
            except OSError as exc:
                raise _unwritable(args.out, exc) from None
            columns[:] = list(scores)
            summary.add(chunk, scores)

        if pipeline:
            score_on_engine(
                list(models),
                PairSource(table),
                backend=args.backend,
                options=options,
                job=_job(args),
                parts=parts,
                batch_tokens=args.batch_tokens,
                progress=lambda done, n: progress.update(done),
                emit=lambda _index, chunk, scores: emit(chunk.table, scores),
            )
            return
        done = 0
        for chunk in table.chunks():
            frame = api.score_pairs(
                chunk,
                models,
                chunk=args.chunk,
                progress=lambda d, n, _rate, done=done: progress.update(done + d, counter.items(done + d)),
            )
            emit(chunk, {key: frame[key].to_numpy() for key in frame.attrs["run"].columns})
            done += len(chunk)

    try:
        if out is None:
            score_into(sys.stdout)
            sys.stdout.flush()
        else:
            _write_atomically(out, args.out, score_into)
    except KeyboardInterrupt:
        held = f"{parts} holds" if parts is not None else "the embedding cache already holds"
        print(
            f"interrupted after {progress.done:,} of {total:,} rows; run the same command again: {held} the "
            "finished rows",
            file=sys.stderr,
            flush=True,
        )
        return INTERRUPTED_EXIT
    seconds = time.perf_counter() - started
    remove_parts(parts)
    for line in summary.lines():
        print(line, file=sys.stderr)
    rate = total / seconds if seconds > 0 else float("nan")
    where = f"wrote {out}" if out is not None else "wrote the scores to stdout"
    print(
        f"{where}: {total:,} rows, {len(columns)} score columns; {seconds:.1f} s ({rate:,.0f} rows/s)", file=sys.stderr
    )
    return 0


def _write_atomically(out: Path, given: str, fill) -> None:
    """``fill(stream)`` into a temporary file beside ``out``, renamed over it when complete (mlse.atomic): a stopped
    run leaves the old file. An error of the file itself is one line naming it; an error while scoring is the
    scoring's."""
    scoring = False
    for stale in out.parent.glob(f".{glob.escape(out.name)}.*.tmp"):
        stale.unlink(missing_ok=True)

    def guarded(stream) -> None:
        nonlocal scoring
        scoring = True
        fill(stream)
        scoring = False

    try:
        atomic_write_stream(out, guarded, text=True)
    except OSError as exc:
        if scoring:
            raise
        raise _unwritable(given, exc) from None


def _unwritable(given: str, exc: OSError) -> MlseError:
    return MlseError(
        f"--out {given}: cannot write it ({exc.strerror or type(exc).__name__}); the embedding "
        "cache holds what was encoded, so running again with another --out is quick"
    )
