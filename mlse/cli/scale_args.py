"""The options every scale command shares (``embed``, ``mine``, ``score``): where the work runs and how big a
forward pass is. The engines themselves live in :mod:`mlse.scale.engine`."""

from __future__ import annotations

import argparse

from mlse.cli.args import add_backend_argument
from mlse.scale.engine import AUTO_RAY_ROWS, ENGINES, EngineOptions


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="auto",
        help=f"local: this process; ray: a pool of model-holding actors on Ray Data (a local Ray started on demand, "
        f"or the cluster at --address); auto: ray from {AUTO_RAY_ROWS:,} rows or with --address, else local "
        "(default auto)",
    )
    parser.add_argument(
        "--address",
        default=None,
        help="join this Ray cluster (HOST:PORT of `ray start --head`, ray://HOST:PORT, or auto)",
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="Ray actors, each holding the model (default: one per CPU or GPU)"
    )
    parser.add_argument(
        "--batch-tokens",
        type=int,
        default=None,
        help="texts per forward pass bounded by this many (estimated) tokens; default: 64 texts",
    )


def add_model_backend(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="registry name, local folder, run, or hub id")
    add_backend_argument(parser, help_text="runtime of the model")


def engine_options(args: argparse.Namespace) -> EngineOptions:
    return EngineOptions(engine=args.engine, address=args.address, workers=args.workers)
