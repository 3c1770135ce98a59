"""Command-line options built from the configuration dataclasses (:mod:`mlse.train.config`), so that a default and
its help text are written once, in the dataclass field.

Options use ``default=argparse.SUPPRESS``: one not given stays out of the namespace and the configuration function
(:func:`mlse.train.config.finetune_config` ...) applies the field's default, as for the app. Also ``--backend``.
"""

from __future__ import annotations

import argparse
from dataclasses import MISSING, Field, fields

from mlse.encoders.identity import BACKENDS, DEFAULT_BACKEND


def csv_list(value: str) -> list[str]:
    """``"en-de, en-fr"`` -> ``["en-de", "en-fr"]``."""
    return [v.strip() for v in value.split(",") if v.strip()]


_TYPES = {"str": str, "int": int, "float": float, "list[str]": csv_list}


def flag_name(f: Field) -> str:
    if f.metadata.get("flag"):
        return f.metadata["flag"]
    name = f.name.replace("_", "-")
    return f"--no-{name}" if f.default is True else f"--{name}"


def _default_text(f: Field) -> str:
    value = f.default_factory() if f.default_factory is not MISSING else f.default
    if f.metadata.get("required") or value is None or isinstance(value, bool):
        return ""
    shown = ",".join(value) if isinstance(value, list) else value
    return f" (default: {shown})"


def add_config_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """One option per field of dataclass ``cls``, typed by the field's annotation."""
    for f in fields(cls):
        meta = f.metadata
        kind = str(f.type).replace(" | None", "")
        kwargs = dict(dest=f.name, default=argparse.SUPPRESS, help=meta.get("help", "") + _default_text(f))
        if meta.get("const") is not None:
            kwargs.update(action="store_const", const=meta["const"])
        elif kind == "bool":
            kwargs.update(action="store_false" if f.default is True else "store_true")
        else:
            kwargs.update(type=_TYPES[kind], choices=meta.get("choices"))
            if meta.get("required"):
                kwargs.update(required=True)
                del kwargs["default"]
        parser.add_argument(flag_name(f), **kwargs)


def config_options(args: argparse.Namespace, cls: type) -> dict:
    """The fields of ``cls`` given on the command line (what the configuration function needs)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in vars(args).items() if k in names}


def add_backend_argument(parser: argparse.ArgumentParser, what: str = "the encoder", *, help_text: str = "") -> None:
    """``--backend`` (torch, onnx or onnx-int8), its help naming ``what`` runs on it (or ``help_text`` in full)."""
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default=DEFAULT_BACKEND,
        help=help_text
        or f"runtime of {what}: torch, onnx (fp32) or onnx-int8 (dynamic int8; exported once and "
        "cached; MLSE_THREADS sets the CPU threads, default 2)",
    )
