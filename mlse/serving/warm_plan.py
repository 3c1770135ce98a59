"""Which warm steps an app needs: one list built from the app's state (its default models, backend, data directory).

``python -m mlse warm`` and the app's background warm build the same list (:func:`warm_plan`); the command keeps
``scope="disk"`` steps, the app also runs those held in its memory. Steps: :mod:`mlse.serving.warm_steps`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mlse.encoders.progress import CacheCounter
from mlse.encoders.progress import Progress as Counted
from mlse.errors import MlseError
from mlse.heads.scorer import Scorer
from mlse.serving.app_state import map_opening
from mlse.serving.warm_steps import (
    TAB_DEFAULTS,
    WARM_UP_TEXT,
    Chunked,
    NotWarm,
    Progress,
    TabDefaults,
    WarmStep,
    cache_only,
    example_texts,
    files_ready,
    map_languages,
    model_problem,
    plain_name,
    uncached,
)
from mlse.stop_signal import StopSignal

ALL_TABS = ("score", "map", "tatoeba", "gold", "finetune")  # a model's files: every tab that runs a model


@dataclass
class WarmContext:
    """How the steps reach models and data: ``encoder(name)`` is the app state's (loaded once, shared with the tabs)."""

    encoder: Callable[[str], object]
    backend: str
    data_dir: str | None = None


def warm_plan(
    state,
    *,
    models: Sequence[str] | None = None,
    openings: dict[str, str | None] | None = None,
    scope: str = "disk",
    defaults: TabDefaults = TAB_DEFAULTS,
) -> list[WarmStep]:
    """The steps that make each tab's first view quick.

    ``models``: what the Score tab scores (default ``state.default_selection()``). ``openings``: the model the Map,
    Tatoeba and Gold tabs open on, by tab (default ``state.preferred_model()``, or the first of ``models``).
    ``scope``: "disk" (cached on disk) or "all" (also the app's in-memory ones). ModelNotFoundError: unknown model."""
    if scope not in ("disk", "all"):
        raise ValueError(f"scope must be 'disk' or 'all', not {scope!r}")
    names = list(dict.fromkeys(models)) if models else state.default_selection()[0]
    first = names[0] if models else state.preferred_model()
    opens = {tab: first if models else (openings or {}).get(tab) or first for tab in ("gold", "tatoeba", "map")}
    ctx = WarmContext(state.encoder, state.backend, state.data_dir)
    used = list(dict.fromkeys([*names, *(m for m in opens.values() if m)]))
    plain = list(dict.fromkeys(plain_name(name) for name in used))  # scorers run on their backbone's files
    texts = example_texts(defaults)
    steps = [files_step(ctx, name) for name in plain]
    steps += [examples_step(ctx, name, texts) for name in plain if texts]
    builders = {"gold": gold_step, "tatoeba": tatoeba_step, "map": map_step}
    data_steps = {tab: builders[tab](ctx, name, defaults) for tab, name in opens.items() if name}
    projects_with_umap = "map" in data_steps and defaults.map_method == "umap"
    if scope == "all":
        steps += [load_step(ctx, name) for name in used]
        steps.append(results_step())
        if projects_with_umap:  # at start, compiled only when the map's first press will project (nothing on disk)
            the_map = data_steps["map"]  # asked each time (not its done bound now): the step's check may be replaced
            steps.append(umap_step(also_done=lambda: the_map.done()))
    elif projects_with_umap:
        steps.append(umap_step())
    return steps + list(data_steps.values())


def _cached(check: Callable[[], object]) -> bool:
    """True when ``check()`` (a computation on :func:`cache_only` encoders) found everything in the cache."""
    try:
        check()
    except NotWarm:
        return False
    return True


def _data_problem(load: Callable[[], object]) -> str | None:
    """The loader's own message when the dataset is missing or unreadable (the step is then skipped), else None."""
    try:
        load()
    except MlseError as exc:
        return str(exc)
    return None


def _stoppable(ctx: WarmContext, name: str, stop: StopSignal, progress: Progress, start: float, span: float):
    """Model ``name`` (loaded unless ``stop`` says stop first) encoding a few batches at a time (a scorer: its
    backbone), asking ``stop`` between them and reporting n of N, the rate over encoded (not cached) texts, the ETA."""
    stop.check(f"loading {name}")
    model = ctx.encoder(name)
    job: list[tuple[Counted, CacheCounter]] = []

    def report(done: int, total: int) -> None:
        if done == 0 or not job:  # an encoding starts: a fresh clock
            job[:] = [(Counted("encoding", total, unit="sentences"), CacheCounter([model]))]
        counted, counter = job[0]
        counted.update(done, total=total, encoded=counter.items(done))
        progress(start + span * done / max(total, 1), counted.line())

    if isinstance(model, Scorer):
        chunked = copy.copy(model)
        chunked.backbone = Chunked(model.backbone, stop, report)
        return chunked
    return Chunked(model, stop, report)


# -- steps that leave their output in the cache ---------------------------------------------------------------------
def files_step(ctx: WarmContext, name: str) -> WarmStep:
    """The files a first encode reads: me5-small converted, a shipped student merged, the ONNX / int8 export, muse's
    prepared table; made by running one text through the model past the embedding cache."""

    def run(progress: Progress, stop: StopSignal) -> None:
        stop.check(f"loading {name}")
        progress(0.1, "loading")
        uncached(ctx.encoder(name)).encode([WARM_UP_TEXT])

    return WarmStep(
        f"files:{name}",
        f"{name}: model files ({ctx.backend})",
        ALL_TABS,
        run,
        done=lambda: files_ready(name, ctx.backend),
        needs=lambda: model_problem(name),
        weight=2.0,
    )


def examples_step(ctx: WarmContext, name: str, texts: list[str]) -> WarmStep:
    """Embeddings of the Score tab's example sentences (the pairs a visitor scores first)."""

    def run(progress: Progress, stop: StopSignal) -> None:
        _stoppable(ctx, name, stop, progress, 0.0, 1.0).encode(texts)

    def done() -> bool:
        return files_ready(name, ctx.backend) and _cached(lambda: cache_only(ctx.encoder(name)).encode(texts))

    return WarmStep(
        f"examples:{name}",
        f"{name}: embeddings of the {len(texts)} example sentences",
        ("score",),
        run,
        done,
        needs=lambda: model_problem(name),
        weight=0.5,
    )


def _scored_data_step(ctx: WarmContext, name: str, tab: str, label: str, compute, load, share: float):
    """``tab``'s first press over a dataset: ``compute(model)`` run once through the embedding cache (``share`` of the
    step's progress goes to encoding), done when the files are there and the cache alone answers it."""

    def run(progress: Progress, stop: StopSignal) -> None:
        compute(_stoppable(ctx, name, stop, progress, 0.0, share))

    def done() -> bool:
        return files_ready(name, ctx.backend) and _cached(lambda: compute(cache_only(ctx.encoder(name))))

    return WarmStep(
        f"{tab}:{name}",
        label,
        (tab,),
        run,
        done,
        needs=lambda: model_problem(name) or _data_problem(load),
        weight=4.0,
        data=True,
    )


def gold_step(ctx: WarmContext, name: str, defaults: TabDefaults = TAB_DEFAULTS) -> WarmStep:
    """The Predicted-vs-gold tab's first press: the default pair's predictions (through the embedding cache)."""
    from mlse.data.stsb import load_sts
    from mlse.evaluation.runners import sts_pair_predictions

    pair, split = defaults.sts_pair, defaults.sts_split
    return _scored_data_step(
        ctx,
        name,
        "gold",
        f"{name}: STS Multi MT {pair} {split} (Predicted vs gold)",
        lambda model: sts_pair_predictions(model, pair, split, data_dir=ctx.data_dir),
        lambda: load_sts(pair, split, ctx.data_dir),
        0.95,
    )


def tatoeba_step(ctx: WarmContext, name: str, defaults: TabDefaults = TAB_DEFAULTS) -> WarmStep:
    """The Tatoeba tab's first press: the default language scored (its embeddings in the cache)."""
    from mlse.data.tatoeba import load_tatoeba
    from mlse.evaluation.runners import tatoeba_language

    lang, k = defaults.tatoeba_lang, defaults.tatoeba_k
    return _scored_data_step(
        ctx,
        name,
        "tatoeba",
        f"{name}: Tatoeba {lang} (Tatoeba errors)",
        lambda model: tatoeba_language(model, lang, data_dir=ctx.data_dir, k=k),
        lambda: load_tatoeba(lang, ctx.data_dir),
        0.9,
    )


def map_step(ctx: WarmContext, name: str, defaults: TabDefaults = TAB_DEFAULTS) -> WarmStep:
    """The Map tab's first press: the default FLORES sample projected in every space of the model (cached .npz)."""
    from mlse.analysis.projection import is_projected, language_map

    n, method, seed = defaults.map_sentences, defaults.map_method, defaults.map_seed

    def project(model, progress: Progress | None = None):
        return language_map(
            model, map_languages(ctx.data_dir), n, data_dir=ctx.data_dir, seed=seed, method=method, progress=progress
        )

    def run(progress: Progress, stop: StopSignal) -> None:
        project(_stoppable(ctx, name, stop, progress, 0.05, 0.25), progress)

    def done() -> bool:  # the panels' files, looked up as language_map looks them up: nothing is projected here
        return files_ready(name, ctx.backend) and is_projected(
            ctx.encoder(name), map_languages(ctx.data_dir), n, data_dir=ctx.data_dir, seed=seed, method=method
        )

    return WarmStep(
        f"map:{name}",
        f"{name}: FLORES map, {n} sentences per language, {method.upper()} (Map)",
        ("map",),
        run,
        done,
        needs=lambda: model_problem(name) or _data_problem(lambda: map_languages(ctx.data_dir)),
        weight=8.0,
        data=True,
        request=(n, method, seed),
    )


# -- steps held by the app's own process ----------------------------------------------------------------------------
def load_step(ctx: WarmContext, name: str) -> WarmStep:
    """A default model loaded into the app (a scorer's heads too) and run once, so a typed pair waits for no load."""

    def run(progress: Progress, stop: StopSignal) -> None:
        stop.check(f"loading {name}")
        uncached(ctx.encoder(name)).encode([WARM_UP_TEXT])

    return WarmStep(
        f"load:{name}",
        f"{name}: loaded in the app",
        ("score",),
        run,
        done=lambda: False,
        needs=lambda: model_problem(name),
    )


def umap_step(also_done: Callable[[], bool] = lambda: False) -> WarmStep:
    """UMAP's kernels compiled into numba's file cache: the first projection on a machine compiles them (~10-20 s on
    2 cores, :func:`mlse.analysis.umap_process.compile_kernels`); a marker in the cache then says done, so ``python
    -m mlse warm`` (a Docker build) pays it, not the app.

    ``also_done`` (the map's first view is on disk): then the app skips it too, since compiling (all cores, not
    interruptible) would hold up other tabs' first visitors; only a visitor projecting a new map pays it."""

    def run(progress: Progress, stop: StopSignal) -> None:
        from mlse.analysis import umap_process

        stop.check("compiling UMAP's kernels")
        umap_process.compile_kernels()

    def done() -> bool:
        from mlse.analysis.umap_process import kernels_marker

        return kernels_marker().is_file() or also_done()

    return WarmStep("umap", "UMAP's kernels compiled for the map", ("map",), run, done=done, weight=0.5)


def results_step() -> WarmStep:
    """The Results tab's index of result files, read once (each file is then memoised until it changes)."""

    def run(progress: Progress, stop: StopSignal) -> None:
        from mlse.runs.results_index import build_index

        stop.check("reading the results index")
        build_index()

    return WarmStep("results", "the Results tab's index", ("results",), run, done=lambda: False, weight=0.2)


def tab_openings(state) -> dict[str, str | None]:
    """The model the Predicted-vs-gold, Tatoeba and Map tabs open on: the preferred backbone, and for the Map a
    shipped Stage-1 scorer on it when there is one (:func:`mlse.serving.app_state.map_opening`)."""
    preferred = state.preferred_model()
    return {"gold": preferred, "tatoeba": preferred, "map": map_opening(state.models(), preferred)}
