"""A calibrated 0-5 score for a backbone: an isotonic map of its cosine onto STS Multi MT dev gold scores.

Raw cosines are not comparable across models; see docs/methods.md#calibration. The fit pools en-en and the 12
cross-lingual pairs (:data:`mlse.data.pairs.CALIBRATION_PAIRS`): cosines for the same gold score sit lower across
languages, so an en-en map alone would under-score every cross-lingual pair.

Files: ``<name>.json`` (knots and weights identity) and ``<name>.manifest.json`` (command, data sha256, dev/test
Spearman), looked up in ``$MLSE_RUNS/calibration`` and then ``assets/models/calibration``. One is used only when fitted
on the same weights (the backend may differ); a calibration of other weights is reported and left unused.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlse import __version__
from mlse.atomic import atomic_write_text
from mlse.calibration.isotonic import IsotonicMap
from mlse.data.pairs import CALIBRATION_PAIRS
from mlse.data.paths import resolve_data_dir
from mlse.data.portable import data_hashes, data_identity
from mlse.data.stsb import load_sts
from mlse.data.types import ScoredPairs
from mlse.dirs import assets_dir, runs_dir
from mlse.encoders.identity import weights_identity
from mlse.encoders.protocol import Scoring
from mlse.errors import MlseError
from mlse.evaluation.correlation import spearman
from mlse.evaluation.runners import predict_sts
from mlse.runs.folders import safe_name

log = logging.getLogger(__name__)

FORMAT = "mlse-calibration/1"
SHIPPED_DIR = assets_dir() / "models" / "calibration"
MANIFEST_SUFFIX = ".manifest.json"


@dataclass(frozen=True)
class BackboneCalibration:
    """The cosine -> 0-5 map of one backbone, tied to the weights it was fitted on."""

    model: str
    weights_identity: str
    mapping: IsotonicMap
    source: str = ""  # the file it was read from ("" when fitted in this process)

    def __call__(self, cosine) -> np.ndarray:
        return self.mapping(cosine)

    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "model": self.model,
            "weights_identity": self.weights_identity,
            **self.mapping.to_dict(),
        }


def local_dir() -> Path:
    """Where ``calibrate`` writes by default: ``$MLSE_RUNS/calibration`` (looked up before the shipped ones)."""
    return runs_dir() / "calibration"


def calibration_file(model: str, folder: str | Path) -> Path:
    return Path(folder) / f"{safe_name(model)}.json"


def read_calibration(path: str | Path) -> BackboneCalibration:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MlseError(f"{path}: not a readable calibration ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise MlseError(f"{path}: not a calibration file (expected format {FORMAT!r})")
    try:
        return BackboneCalibration(
            str(data["model"]), str(data["weights_identity"]), IsotonicMap.from_dict(data), source=str(path)
        )
    except KeyError as exc:
        raise MlseError(f"{path}: calibration without {exc}") from None


# -- fitting --------------------------------------------------------------------------------------------------------
def fit_calibration(
    encoder,
    *,
    data_dir=None,
    pairs: Sequence[str] = CALIBRATION_PAIRS,
    max_rows: int | None = None,
    batch_size: int = 64,
    progress: Callable[[str], None] | None = None,
) -> tuple[BackboneCalibration, dict]:
    """Fit on the dev split of ``pairs`` (pooled), evaluate on dev and test -> (calibration, report).

    ``max_rows`` keeps the first rows of each pair (quick checks). The report holds Spearman x 100 of the cosine and
    the calibrated score (pooled and per-pair mean), the calibrated score's mean absolute error in gold points, and
    the data files' sha256.
    """
    say = progress or (lambda _msg: None)
    dev = _load_split(pairs, "dev", data_dir, max_rows)
    test = _load_split(pairs, "test", data_dir, max_rows)
    started = time.perf_counter()
    say(f"encoding {sum(len(d) for d in dev.values())} dev and {sum(len(d) for d in test.values())} test pairs")
    dev_cos = predict_sts(encoder, dev, batch_size=batch_size)  # {pair: [n]}
    test_cos = predict_sts(encoder, test, batch_size=batch_size)
    sources = (path for ds in [*dev.values(), *test.values()] for path in ds.sources)
    mapping = IsotonicMap.fit(np.concatenate(list(dev_cos.values())), np.concatenate([d.scores for d in dev.values()]))
    calibration = BackboneCalibration(encoder.name, weights_identity(encoder.identity), mapping)
    report = {
        "pairs": list(pairs),
        "max_rows": max_rows,
        "knots": len(mapping.x),
        "dev": _split_metrics(dev, dev_cos, mapping),
        "test": _split_metrics(test, test_cos, mapping),
        # {portable path (mlse.data.portable): sha256} of every source file
        "data": (data := dict(sorted(data_hashes(sources, resolve_data_dir(data_dir)).items()))),
        "data_identity": data_identity(data),
        "seconds": round(time.perf_counter() - started, 1),
    }
    return calibration, report


def _load_split(pairs, split, data_dir, max_rows):
    if not pairs:
        raise MlseError("a calibration needs at least one STS pair, e.g. en-en")
    full = {pair: load_sts(pair, split, data_dir) for pair in pairs}  # DataError names the missing file
    return {
        p: ScoredPairs(d.s1[:max_rows], d.s2[:max_rows], d.scores[:max_rows], d.name, d.sources)
        for p, d in full.items()
    }


def _split_metrics(datasets, cosines, mapping: IsotonicMap) -> dict:
    def spearman_x100(pred, gold) -> float:
        return round(spearman(pred, gold) * 100, 2)  # NaN stays NaN

    gold_all = np.concatenate([d.scores for d in datasets.values()])
    cos_all = np.concatenate(list(cosines.values()))
    calibrated = mapping(cos_all)
    per_pair = {
        p: (spearman_x100(cosines[p], d.scores), spearman_x100(mapping(cosines[p]), d.scores))
        for p, d in datasets.items()
    }
    return {
        "n": int(len(gold_all)),
        "spearman_cosine_pooled": spearman_x100(cos_all, gold_all),
        "spearman_calibrated_pooled": spearman_x100(calibrated, gold_all),
        "spearman_cosine_mean": round(float(np.mean([c for c, _ in per_pair.values()])), 2),
        "spearman_calibrated_mean": round(float(np.mean([k for _, k in per_pair.values()])), 2),
        "mae_calibrated": round(float(np.mean(np.abs(calibrated - gold_all))), 3),
        "per_pair_spearman_calibrated": {p: k for p, (_, k) in per_pair.items()},
    }


def save_calibration(
    calibration: BackboneCalibration, report: dict, folder: str | Path, *, command: str
) -> tuple[Path, Path]:
    """Write ``<name>.json`` and ``<name>.manifest.json`` into ``folder`` (each atomically) -> their paths."""
    path = calibration_file(calibration.model, folder)
    manifest = {
        "model": calibration.model,
        "weights_identity": calibration.weights_identity,
        "command": command,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "mlse_version": __version__,
        **report,
    }
    manifest_path = path.with_name(path.name.removesuffix(".json") + MANIFEST_SUFFIX)
    atomic_write_text(manifest_path, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    atomic_write_text(path, json.dumps(calibration.to_dict(), indent=1) + "\n")
    return path, manifest_path


# -- finding one for a loaded encoder -------------------------------------------------------------------------------
def find_calibration(encoder) -> tuple[BackboneCalibration | None, str]:
    """(the calibration fitted on this encoder's weights, "") or (None, why none is used; "" when none exists).

    A calibration file for the name that was fitted on other weights is named in the message, never applied.
    """
    mine = weights_identity(encoder.identity)
    mismatched = []
    for folder in (local_dir(), SHIPPED_DIR):  # run-local calibrations first (a fresh ``calibrate`` wins), then shipped
        path = calibration_file(encoder.name, folder)
        if not path.is_file():
            continue
        try:
            found = read_calibration(path)
        except MlseError as exc:
            mismatched.append(str(exc))
            continue
        if found.weights_identity == mine:
            return found, ""
        mismatched.append(f"{path} was fitted on {found.weights_identity}")
    if not mismatched:
        return None, ""
    note = (
        f"{encoder.name}: no calibration for its weights ({mine}); {'; '.join(mismatched)} — not used. "
        f"Fit one: python -m mlse calibrate --model {encoder.name}"
    )
    log.warning("%s", note)
    return None, note


class CalibratedEncoder(Scoring):
    """An encoder whose ``calibrate(cos) -> 0..5`` applies ``calibration``; everything else is the wrapped encoder's."""

    def __init__(self, inner, calibration: BackboneCalibration):
        self.inner = inner
        self.calibration = calibration

    def __getattr__(self, attr):  # name, encode, identity, stats, path, ...: whatever the wrapped encoder offers
        if attr == "inner":  # not set yet (unpickling): do not recurse
            raise AttributeError(attr)
        return getattr(self.inner, attr)


def with_calibration(encoder) -> tuple[object, str]:
    """(``encoder`` wrapped with its calibration, "") when one matches its weights, else (``encoder``, note)."""
    calibration, note = find_calibration(encoder)
    return (CalibratedEncoder(encoder, calibration), "") if calibration is not None else (encoder, note)
