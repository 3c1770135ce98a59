"""Command line: ``python -m mlse models|score|explain|eval|calibrate ...``.

User mistakes (unknown model, missing data, malformed file) print one line starting with ``error:`` and exit 2; only
bugs produce a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from mlse.atomic import atomic_write_text
from mlse.calibration.backbone import fit_calibration, local_dir, save_calibration
from mlse.cli.args import add_backend_argument, add_config_arguments, config_options, csv_list
from mlse.cli.data import add_data_parser, cmd_data
from mlse.cli.embed import add_embed_parser, cmd_embed
from mlse.cli.experiment import add_experiment_parser, cmd_experiment
from mlse.cli.explain import add_explain_parser, cmd_explain
from mlse.cli.mine import add_mine_parser, cmd_mine
from mlse.cli.records import add_records_parser, cmd_records
from mlse.cli.score import add_score_parser, cmd_score
from mlse.cli.warm import add_warm_parser, cmd_warm
from mlse.data.pairs import CALIBRATION_PAIRS
from mlse.data.paths import resolve_data_dir
from mlse.data.tatoeba import tatoeba_languages
from mlse.dirs import runs_dir
from mlse.encoders.catalogue import DEFAULT_MODEL, available_models
from mlse.errors import MlseError
from mlse.evaluation import runners
from mlse.experiments.assets import reproduce_assets
from mlse.heads.scorer import Scorer
from mlse.models import load_model
from mlse.runs.results import format_table, result_table
from mlse.train.config import (
    FinetuneConfig,
    Stage1Settings,
    Stage2Settings,
    finetune_config,
    stage1_settings,
    stage2_settings,
)
from mlse.train.finetune import finetune
from mlse.train.head_training import train_heads

log = logging.getLogger("mlse")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mlse", description="Multilingual semantic textual similarity.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and the result table")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("models", help="list the models that load here and those that need the hub")
    add_score_parser(sub)
    add_explain_parser(sub)
    add_warm_parser(sub)
    add_records_parser(sub)
    add_data_parser(sub)
    add_embed_parser(sub)
    add_mine_parser(sub)

    # train and finetune: one option per field of the configuration dataclasses (defaults, help: mlse.train.config)
    tr = sub.add_parser("train", help="train a Stage 1 or Stage 2 head on a frozen backbone")
    tr_sub = tr.add_subparsers(dest="stage", required=True)
    s1 = tr_sub.add_parser("stage1", help="meaning/language split (Tiyajamorn et al. 2021) on parallel data")
    add_config_arguments(s1, Stage1Settings)
    s2 = tr_sub.add_parser("stage2", help="STS head on Stage-1 meaning embeddings")
    add_config_arguments(s2, Stage2Settings)

    add_experiment_parser(sub)

    ft = sub.add_parser("finetune", help="fine-tune a student encoder: MSE / EMA distillation, soft / hard contrastive")
    add_config_arguments(ft, FinetuneConfig)
    add_backend_argument(ft, "training (only torch: evaluate the saved run with eval --backend instead)")

    ev = sub.add_parser("eval", help="evaluate a model on STS, Tatoeba or bitext mining")
    ev.add_argument(
        "--model", default=DEFAULT_MODEL, help=f"registry name, local folder, run, or hub id (default {DEFAULT_MODEL})"
    )
    add_backend_argument(ev, "the model (a scorer's backbone)")
    ev.add_argument("--task", required=True, choices=["sts", "tatoeba", "mining"])
    ev.add_argument("--pairs", type=csv_list, default=[], help="STS pairs, e.g. en-en,en-de (STS Multi MT)")
    ev.add_argument(
        "--pairs-file",
        action="append",
        default=[],
        help="your rated pairs: sentence1, sentence2, score; TSV, CSV or JSONL (repeatable)",
    )
    ev.add_argument("--split", default="test", choices=["train", "dev", "test"], help="STS Multi MT split")
    ev.add_argument(
        "--langs",
        type=csv_list,
        default=[],
        help="Tatoeba languages, e.g. deu,fra,rus,cmn,swh, or all (every language in the data)",
    )
    ev.add_argument("--pair", default="de-en", help="mining pair, e.g. de-en, ru-en, zh-en")
    ev.add_argument("--n-gold", type=int, default=600, help="mining: gold pairs hidden (split between train/test)")
    ev.add_argument("--seed", type=int, default=0, help="mining: seed of the task construction")
    ev.add_argument("--data-dir", default=None, help="datasets folder (else $MLSE_DATA, else ../shared/data)")
    ev.add_argument("--json-out", default=None, help="write the result JSON here")
    ev.add_argument("--errors-out", default=None, help="tatoeba: write the retrieval errors (JSON) here")
    ev.add_argument("--batch-size", type=int, default=64)
    ev.add_argument("--device", default=None, help="cpu, cuda, ... (default: cuda if available)")
    ev.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")

    cal = sub.add_parser("calibrate", help="fit a backbone's cosine -> 0-5 map on STS Multi MT dev (isotonic)")
    cal.add_argument("--model", required=True, help="registry name, local folder, run, or hub id")
    cal.add_argument(
        "--out",
        default=None,
        help="folder for <name>.json and <name>.manifest.json (default: "
        "$MLSE_RUNS/calibration; the shipped ones live in assets/models/calibration)",
    )
    cal.add_argument(
        "--pairs",
        type=csv_list,
        default=None,
        help="STS pairs pooled in the fit (default: en-en and the 12 cross-lingual pairs)",
    )
    cal.add_argument("--max-rows", type=int, default=None, help="first rows per pair only (a quick check)")
    add_backend_argument(cal, "the model (the calibration applies to every backend of the same weights)")
    cal.add_argument("--data-dir", default=None)
    cal.add_argument("--batch-size", type=int, default=64)

    rep = sub.add_parser("reproduce", help="regenerate the trained artifacts shipped under assets/models")
    rep.add_argument("what", choices=["assets"])
    rep.add_argument("--only", type=csv_list, default=None, help="these artifacts only (default: every one)")
    rep.add_argument("--out", default=None, help="assets folder to write (default: the repository's assets/models)")
    rep.add_argument("--data-dir", default=None)
    return parser


def cmd_models(args: argparse.Namespace) -> int:
    rows = [vars(m) | {"name": m.name} for m in available_models()]
    print(format_table(rows, ["name", "source", "status", "description", "location"]))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    def epoch_line(record: dict) -> None:
        shown = {k: round(v, 4) for k, v in record.items() if isinstance(v, float)}
        print(f"epoch {record['epoch']}: " + ", ".join(f"{k} {v}" for k, v in shown.items()), flush=True)

    make, fields = (stage1_settings, Stage1Settings) if args.stage == "stage1" else (stage2_settings, Stage2Settings)
    settings = make(**config_options(args, fields))
    scorer = train_heads(settings, progress=epoch_line)
    print(json.dumps(scorer.metadata.get("metrics", {}), indent=1))
    print(f"saved {settings.out}; use it as --model {settings.out}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    if args.batch_size < 1:
        raise MlseError(f"--batch-size must be a positive integer, got {args.batch_size}")
    data_dir = resolve_data_dir(args.data_dir) if (args.task != "sts" or args.pairs) else args.data_dir
    encoder = load_model(args.model, backend=args.backend, device=args.device, cache=not args.no_cache)
    if args.task == "sts":
        result = runners.run_sts(
            encoder,
            pairs=args.pairs,
            pairs_files=args.pairs_file,
            split=args.split,
            data_dir=data_dir,
            batch_size=args.batch_size,
        )
    elif args.task == "tatoeba":
        if not args.langs:
            raise MlseError("--task tatoeba needs --langs, e.g. --langs deu,fra,rus")
        langs = tatoeba_languages(data_dir) if args.langs == ["all"] else args.langs
        result = runners.run_tatoeba(encoder, langs=langs, data_dir=data_dir, batch_size=args.batch_size)
    else:
        result = runners.run_mining(
            encoder, pair=args.pair, data_dir=data_dir, n_gold=args.n_gold, seed=args.seed, batch_size=args.batch_size
        )
    elapsed = time.perf_counter() - started
    print(f"{result.task} | model {result.model} ({result.model_identity}) | split {result.split}")
    print(result_table(result))
    stats = result.encode_stats
    if stats:
        print(f"encoded {stats.get('encoded', 0)} texts, served {stats.get('served', 0)} from cache; {elapsed:.1f}s")
    if args.json_out:
        print(f"wrote {result.write_json(args.json_out)}")
    if args.errors_out and result.task == "tatoeba":
        atomic_write_text(args.errors_out, json.dumps(result.extras["errors"], ensure_ascii=False, indent=1))
        print(f"wrote {args.errors_out}")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    if args.max_rows is not None and args.max_rows < 2:
        raise MlseError(f"--max-rows must be at least 2, got {args.max_rows}")
    encoder = load_model(args.model, backend=args.backend)
    if isinstance(encoder, Scorer):
        raise MlseError(
            f"{args.model!r} is a scorer (backbone + heads): calibrate its backbone instead; a Stage-2 "
            "head carries its own calibration"
        )
    started = time.perf_counter()
    calibration, report = fit_calibration(
        encoder,
        data_dir=args.data_dir,
        pairs=args.pairs or CALIBRATION_PAIRS,
        max_rows=args.max_rows,
        batch_size=args.batch_size,
        progress=lambda msg: log.info("%s", msg),
    )
    command = "python -m mlse " + " ".join(sys.argv[1:] if args.argv is None else args.argv)
    path, manifest = save_calibration(calibration, report, args.out or local_dir(), command=command)
    for split in ("dev", "test"):
        m = report[split]
        print(
            f"{split}: {m['n']} pairs, Spearman x 100 pooled {m['spearman_cosine_pooled']:.2f} (cosine) -> "
            f"{m['spearman_calibrated_pooled']:.2f} (calibrated), mean over pairs {m['spearman_cosine_mean']:.2f} "
            f"-> {m['spearman_calibrated_mean']:.2f}; mean |calibrated - gold| {m['mae_calibrated']:.3f}"
        )
    print(f"{report['knots']} knots, weights {calibration.weights_identity}; {time.perf_counter() - started:.1f}s")
    print(f"wrote {path} and {manifest}")
    return 0


def cmd_finetune(args: argparse.Namespace) -> int:
    def line(record: dict) -> None:
        dev, best = record["dev_spearman"], record["best_dev_spearman"]
        loss = "-" if record["loss"] is None else f"{record['loss']:.5f}"
        print(
            f"step {record['step']} | epoch {record['epoch']:.3f} | loss {loss} | {record['elapsed_s']:.0f}s | "
            f"dev {dev if dev is None else round(dev, 2)} (best {best if best is None else round(best, 2)})"
            + (" saved" if record.get("saved") else ""),
            flush=True,
        )

    if args.backend != "torch":
        raise MlseError(
            f"finetune trains and evaluates a torch model, so --backend {args.backend} does not apply; evaluate the "
            f"saved run on it instead: python -m mlse eval --model RUN --backend {args.backend} --task sts ..."
        )
    config = finetune_config(**config_options(args, FinetuneConfig))
    metrics = finetune(config, progress=line)
    if metrics.get("rank", 0) == 0:  # one summary per run: ranks printing at once would interleave their lines
        keys = (
            "stop_reason",
            "steps",
            "best_dev_spearman",
            "best_step",
            "final_dev_spearman",
            "sentences_per_s",
            "elapsed_s",
            "world_size",
            "parameter_checksum",
            "rank_checksums",
        )
        print(json.dumps({k: metrics[k] for k in keys if k in metrics}), flush=True)
        print(f"saved {config.out}; use it as --model {config.out}", flush=True)
    if metrics.get("world_size", 1) > 1:
        from mlse.train.distributed import exit_worker

        exit_worker(0)
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    items = reproduce_assets(
        only=args.only,
        out=Path(args.out) if args.out else None,
        runs=runs_dir() / "assets",
        data_dir=args.data_dir,
        progress=lambda msg: print(msg, flush=True),
    )
    for item in items:
        scores = item.manifest["scores"]
        print(f"{item.name}: cross-12 {scores['cross-12']:.2f}, en-en {scores['en-en']:.2f} ({item.folder})")
    return 0


COMMANDS = {
    "reproduce": cmd_reproduce,
    "models": cmd_models,
    "score": cmd_score,
    "embed": cmd_embed,
    "mine": cmd_mine,
    "warm": cmd_warm,
    "records": cmd_records,
    "explain": cmd_explain,
    "data": cmd_data,
    "train": cmd_train,
    "experiment": cmd_experiment,
    "eval": cmd_eval,
    "calibrate": cmd_calibrate,
    "finetune": cmd_finetune,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = None if argv is None else list(argv)  # recorded in what a command writes (calibrate's manifest)
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    # Library chatter (model loading, HTTP) is noise at INFO; keep mlse's own messages.
    for noisy in ("sentence_transformers", "transformers", "httpx", "huggingface_hub", "urllib3", "faiss"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    try:
        return COMMANDS[args.command](args)
    except MlseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
