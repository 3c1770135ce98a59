"""The steps of a warm start: what each tab's first view computes, for the default models and settings.

Each :class:`WarmStep` calls the library function the tab's handler calls, with the tab's default arguments, so what
it leaves in the cache is exactly what the tab's first press looks up (the list: :mod:`mlse.serving.warm_plan`).
``done()`` never computes: file checks, or the library call on a :func:`cache_only` encoder. Encoding goes a few
batches at a time through the embedding cache, so a stopped step keeps what it encoded. tests/serving/test_warm.py
checks :data:`TAB_DEFAULTS` against the tab modules.
"""

from __future__ import annotations

import copy
import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mlse.data.json_safe import finite_or_none
from mlse.data.pairs import DEFAULT_MAP_LANGS
from mlse.dirs import assets_dir
from mlse.encoders.cache import CachedEncoder
from mlse.encoders.catalogue import resolve_model, spec_status
from mlse.encoders.hub import hub_cached
from mlse.encoders.registry import ModelSpec
from mlse.errors import MlseError
from mlse.heads.scorer import Scorer, backbone_name
from mlse.runs.folders import is_model_folder
from mlse.stop_signal import StopSignal, encode_in_chunks
from mlse.text.control_chars import strip_controls

Progress = Callable[[float, str], None]  # (fraction of the step done, what it is doing)
EXAMPLES_FILE = assets_dir() / "examples.tsv"
WARM_UP_TEXT = "warm-up"  # one text run through a model, past the cache, so that it loads and prepares its files


@dataclass(frozen=True)
class TabDefaults:
    """What each tab computes on its first press when nothing was changed (the tabs' own constants)."""

    examples_file: Path = EXAMPLES_FILE
    example_max_chars: int = 2000  # mlse.text.sentences.MAX_CHARS
    sts_pair: str = "en-de"  # gold_tab.DEFAULT_PAIR
    sts_split: str = "test"
    tatoeba_lang: str = "deu"  # tatoeba_tab.DEFAULT_LANG
    tatoeba_k: int = 4  # tatoeba_views.MARGIN_K
    map_sentences: int = 100  # map_tab.DEFAULT_SENTENCES
    map_method: str = "umap"
    map_seed: int = 0


TAB_DEFAULTS = TabDefaults()


@dataclass
class WarmStep:
    """One named piece of a warm start. ``run(progress, stop)`` computes it, asking ``stop`` (the warm's
    :class:`~mlse.stop_signal.StopSignal`) before it starts and between encoding chunks (raises ``Stopped``);
    ``done()``: its output is there already; ``needs()``: why it cannot run here (None: it can)."""

    name: str  # stable id, e.g. "map:me5-small"
    label: str  # what the progress line says
    tabs: tuple[str, ...]  # the tabs whose first view needs it
    run: Callable[[Progress, StopSignal], None]
    done: Callable[[], bool]
    needs: Callable[[], str | None] = lambda: None
    weight: float = 1.0  # rough share of the work, for the overall percentage
    data: bool = False  # reads a dataset (the app waits for its data fetch before such a step)
    request: tuple = ()  # what the step computes beyond its name (the map: sentences, method, seed), for a tab to match


class NotWarm(Exception):
    """A text is not in the embedding cache (raised by :func:`cache_only` encoders: a done() check never encodes)."""


# -- encoders as the steps use them ---------------------------------------------------------------------------------
class _Refuse:
    """An encoder's identity without its network: encoding anything raises :class:`NotWarm`."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name

    @property
    def identity(self) -> str:
        return self.inner.identity

    def encode(self, texts, **kwargs):
        raise NotWarm(f"{len(texts)} texts not in the embedding cache of {self.name}")


def _cached_layer(model) -> CachedEncoder | None:
    """The embedding-cache layer inside the app's wrappers (calibration), or None."""
    for _ in range(8):
        if model is None or isinstance(model, CachedEncoder):
            return model
        model = vars(model).get("inner")
    return None


def cache_only(model):
    """``model`` answering from the embedding cache only (a missing text raises :class:`NotWarm`); a scorer keeps its
    heads on a cache-only backbone. A model without a cache layer cannot be checked: NotWarm at once."""
    if isinstance(model, Scorer):
        checked = copy.copy(model)
        checked.backbone = cache_only(model.backbone)
        return checked
    cached = _cached_layer(model)
    if cached is None:
        raise NotWarm(f"{getattr(model, 'name', model)} has no embedding cache")
    return CachedEncoder(_Refuse(cached.inner), root=cached.root)


class Chunked:
    """``model`` encoding a few batches at a time (:func:`mlse.stop_signal.encode_in_chunks`): a stop is honoured
    within seconds and finished chunks are cached. ``progress(done, total)``: at each encoding's start and chunk."""

    def __init__(self, model, stop: StopSignal, progress: Callable[[int, int], None] | None = None):
        self._model = model
        self._stop = stop
        self._progress = progress

    def encode(self, texts, *, normalize: bool = True, batch_size: int = 64, show_progress: bool | None = None):
        texts = list(texts)
        if self._progress is not None:
            self._progress(0, len(texts))  # an encoding starts: its clock and its "0 of N"
        return encode_in_chunks(
            self._model,
            texts,
            stop=self._stop,
            batch_size=batch_size,
            progress=self._progress,
            normalize=normalize,
            show_progress=False,
        )

    def __getattr__(self, attr):
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self._model, attr)


def uncached(model):
    """The network under the cache and calibration layers (a scorer: its backbone's), to run one text through it."""
    for _ in range(8):
        inner = vars(model).get("inner") or vars(model).get("backbone")
        if inner is None:
            return model
        model = inner
    return model


# -- models ---------------------------------------------------------------------------------------------------------
def plain_name(name: str) -> str:
    """The model whose weights ``name`` runs on: a scorer's backbone, else ``name`` itself."""
    spec = resolve_model(name)
    return backbone_name(Path(spec.location)) if spec.source == "scorer" else name


def model_problem(name: str) -> str | None:
    """Why ``name`` does not load here (not installed, a hub model not downloaded), or None."""
    try:
        spec = resolve_model(plain_name(name))
    except MlseError as exc:
        return str(exc)
    status = spec_status(spec)
    return None if status.startswith("available") else f"{name} does not load here ({status})"


def files_ready(name: str, backend: str) -> bool:
    """The files a first encode of ``name`` on ``backend`` reads are all there: no conversion, export or preparation
    left (checked on disk, nothing built)."""
    spec = resolve_model(plain_name(name))
    if spec.source == "native":
        return _native_ready(spec, backend)
    path = hub_cached(spec.location) if spec.source == "hub" else Path(spec.location)
    if path is None or not is_model_folder(path):
        return False
    if backend == "torch":
        return True
    from mlse.encoders.identity import folder_fingerprint
    from mlse.encoders.onnx.export import export_folder, is_complete, variant_dirname

    variant = "int8" if backend == "onnx-int8" else "fp32"
    return is_complete(export_folder(spec.name, folder_fingerprint(path)) / variant_dirname(variant))


def _native_ready(spec: ModelSpec, backend: str) -> bool:
    from mlse.encoders.use import TABLE_FILE, UseEncoder

    prepared = UseEncoder(spec.location, name=spec.name, backend=backend).prepared_dir
    if not (prepared / TABLE_FILE).is_file():
        return False
    if backend == "torch":
        return True
    from mlse.encoders.onnx.use_graph import META_FILE, graph_dir

    return (graph_dir(prepared) / META_FILE).is_file()


# -- the Score tab's example pairs ----------------------------------------------------------------------------------
def example_texts(defaults: TabDefaults = TAB_DEFAULTS) -> list[str]:
    """Every sentence of the Score tab's examples, cleaned as the tab cleans what it scores (controls out, stripped,
    truncated), each once; [] when the file is missing."""
    texts: dict[str, None] = {}
    for row in load_examples(defaults.examples_file):
        pair = [
            strip_controls(row.get(key) or "")[0].strip()[: defaults.example_max_chars]
            for key in ("sentence1", "sentence2")
        ]
        if all(pair):
            texts.update(dict.fromkeys(pair))
    return list(texts)


def load_examples(path: Path = EXAMPLES_FILE) -> list[dict]:
    """Ready-made pairs from assets/examples.tsv: sentence1, sentence2, lang1, lang2, gold (float or None), note; []
    when the file is missing."""
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    except OSError:
        return []
    return [
        {**row, "gold": finite_or_none(row.get("gold") or None)}
        for row in rows
        if (row.get("sentence1") or "").strip() and (row.get("sentence2") or "").strip()
    ]


def map_languages(data_dir=None) -> list[str]:
    """The Map tab's default languages: its eight defaults found in FLORES, else the first eight found."""
    from mlse.data.flores import flores_languages

    found = flores_languages(data_dir)  # DataError when FLORES is missing
    return [lang for lang in DEFAULT_MAP_LANGS if lang in found] or found[:8]
