"""Run chunks of work (:mod:`mlse.scale.work`) in this process or on Ray Data, and stream their results back.

``local``: one :class:`~mlse.scale.work.ChunkWorker` here, chunk after chunk. ``ray``: a Ray Dataset of pickled
chunks mapped by a pool of ``workers`` actors (one CPU or GPU each) that load the models once; results stream back in
any order with their chunk index; a dead actor is restarted and its chunk run again, so no chunk is lost. ``auto``
picks local below :data:`AUTO_RAY_ROWS` rows, or when no ``--address`` is given and this machine is all there is.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from mlse.dirs import positive_env
from mlse.encoders.threads import THREADS_ENV
from mlse.errors import MlseError
from mlse.scale.cluster import connect, resources
from mlse.scale.work import ChunkWorker, WorkSpec

ENGINES = ("auto", "local", "ray")
# auto switches to Ray from this many rows on: starting Ray and loading a model per actor pays off only on long jobs
AUTO_RAY_ROWS = 1_000_000


@dataclass(frozen=True)
class EngineOptions:
    """Where chunks run: ``engine`` (auto, local, ray), the cluster ``address`` (None: a local Ray started on
    demand), the actor count ``workers`` (None: one per CPU, or per GPU where the cluster has GPUs)."""

    engine: str = "auto"
    address: str | None = None
    workers: int | None = None

    def __post_init__(self):
        if self.engine not in ENGINES:
            raise MlseError(f"unknown engine {self.engine!r}; choose from {', '.join(ENGINES)}")
        if self.workers is not None and self.workers < 1:
            raise MlseError(f"--workers must be a positive integer, got {self.workers}")
        if self.engine == "local" and self.address:
            raise MlseError("--address joins a Ray cluster: use it with --engine ray (or auto)")

    def resolve(self, rows: int) -> str:
        """The engine a job of ``rows`` rows runs on."""
        if self.engine != "auto":
            return self.engine
        return "ray" if self.address or rows >= AUTO_RAY_ROWS else "local"


def note(line: str) -> None:
    """A progress line of a scale job: on stderr, at once (stdout may be the job's output)."""
    print(line, file=sys.stderr, flush=True)


class Workers:
    """What the workers reported, one entry per process (host, pid): chunks run, peak resident memory (MiB) and CPU
    time (s). ``check(identities)`` gets each new worker's model identities (other weights stop the job)."""

    def __init__(self, check: Callable[[dict[str, str]], None] | None = None):
        self.check = check
        self.seen: dict[tuple[str, int], dict] = {}

    def note(self, about: dict) -> None:
        key = (about["host"], about["pid"])
        entry = self.seen.get(key)
        if entry is None:
            if self.check is not None:
                self.check(about["identities"])
            entry = self.seen[key] = {"host": about["host"], "pid": about["pid"], "chunks": 0, "peak_rss_mib": 0.0}
        entry["chunks"] += 1
        entry["peak_rss_mib"] = max(entry["peak_rss_mib"], about["peak_rss_mib"])
        entry["cpu_s"] = max(entry.get("cpu_s", 0.0), about.get("cpu_s", 0.0))  # so far: the last report is the most

    def summary(self) -> list[dict]:
        return sorted(self.seen.values(), key=lambda e: (e["host"], e["pid"]))

    def lines(self, what: str) -> list[str]:
        return [
            f"{what} worker {e['host']}:{e['pid']}: {e['chunks']} chunk(s), peak memory {e['peak_rss_mib']:,.0f} MiB, "
            f"{e['cpu_s']:,.1f} CPU-s"
            for e in self.summary()
        ]


def run_chunks(
    spec: WorkSpec, chunks: Iterable[tuple[int, object]], options: EngineOptions, *, rows: int, workers: Workers
) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """(chunk index, result) for every (index, payload) of ``chunks``, as they finish. ``chunks`` may be a generator:
    the Ray engine needs the payloads up front, so keep them small (locators). ``workers`` notes who ran each chunk."""
    if options.resolve(rows) == "local":
        worker = None
        for index, payload in chunks:
            worker = worker or ChunkWorker(spec)
            result = worker.traced_run(index, payload)
            workers.note(worker.about())
            yield index, result
        return
    chunks = list(chunks)
    if chunks:
        yield from _run_ray(spec, chunks, options, workers)


def _run_ray(
    spec: WorkSpec, chunks: list[tuple[int, object]], options: EngineOptions, workers: Workers
) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    import ray.data  # lazy: only the Ray engine needs Ray

    connect(options.address)
    have = resources()
    gpus = 0 if spec.kind == "search" else int(have["GPU"])  # a search runs on CPUs
    per_actor = {"num_gpus": 1} if gpus else {"num_cpus": 1}
    slots = gpus or int(have["CPU"]) or 1
    actors = min(options.workers or slots, len(chunks))
    if actors > slots:
        raise MlseError(
            f"--workers {actors}: the cluster has {slots} {'GPU' if gpus else 'CPU'}(s), so only {slots} "
            "workers can run; ask for fewer or add nodes"
        )
    items = [{"index": index, "payload": pickle.dumps(payload, protocol=5)} for index, payload in chunks]
    dataset = ray.data.from_items(items, override_num_blocks=len(items))
    mapped = dataset.map_batches(
        ChunkWorker,
        fn_constructor_kwargs={"spec": spec.as_dict(), "threads": _threads(have, actors, gpus)},
        compute=ray.data.ActorPoolStrategy(size=actors),
        batch_size=1,
        batch_format="numpy",
        **per_actor,
    )
    for batch in mapped.iter_batches(batch_size=1, batch_format="numpy", prefetch_batches=0):
        for index, result, about in zip(batch["index"], batch["result"], batch["worker"]):
            workers.note(pickle.loads(about))
            yield int(index), pickle.loads(result)


def _threads(have: dict[str, float], workers: int, gpus: int) -> int | None:
    """Threads per CPU actor: the local machine's cores shared among the actors, at most ``MLSE_THREADS`` where it
    is set (None on a GPU)."""
    if gpus:
        return None
    cap = positive_env(THREADS_ENV, os.cpu_count() or 1)
    return max(1, min(cap, os.cpu_count() or 1, int(have["CPU"]) // max(1, workers)))
