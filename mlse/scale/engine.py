"""Run chunks of work (:mod:`mlse.scale.work`) in this process or on Ray Data, and stream their results back.

``local``: one :class:`~mlse.scale.work.ChunkWorker` here, chunk after chunk. ``ray``: the chunks become a Ray
Dataset (one row a chunk, pickled), mapped by a pool of ``workers`` actors that each load the models once
(``map_batches(ChunkWorker, compute=ActorPoolStrategy(size=workers))``; one CPU each, or one GPU each when the
cluster has GPUs); results stream back as they finish, in any order, each with its chunk index. Both engines run
the same code on the same chunks, so their numbers are the same. ``auto`` picks local below :data:`AUTO_RAY_ROWS`
rows, or whenever ``--address`` is not given and this machine is all there is to use.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from mlse.errors import MlseError
from mlse.scale.cluster import connect, resources
from mlse.scale.work import ChunkWorker, WorkSpec

ENGINES = ("auto", "local", "ray")
# auto switches to Ray from this many rows on: a local Ray costs ~10 s to start plus a model load per actor (measured
# in docs/scale.md), which pays off only when the job is minutes long on this machine
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


Identity = Callable[[dict[str, str]], None]


def run_chunks(
    spec: WorkSpec, chunks: list[tuple[int, object]], options: EngineOptions, *, rows: int, identity: Identity
) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """(chunk index, result) for every (index, payload) of ``chunks``, as they finish; ``identity(models)`` is
    called with the models' identities before the first result (once per worker on Ray)."""
    if not chunks:
        return
    if options.resolve(rows) == "local":
        worker = ChunkWorker(spec)
        identity(worker.identities())
        for index, payload in chunks:
            yield index, worker.run(payload)
        return
    yield from _run_ray(spec, chunks, options, identity)


def _run_ray(
    spec: WorkSpec, chunks: list[tuple[int, object]], options: EngineOptions, identity: Identity
) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    import ray.data  # lazy: only the Ray engine needs Ray

    connect(options.address)
    have = resources()
    gpus = int(have["GPU"])
    per_actor = {"num_gpus": 1} if gpus else {"num_cpus": 1}
    slots = gpus or int(have["CPU"]) or 1
    workers = min(options.workers or slots, len(chunks))
    if workers > slots:
        raise MlseError(
            f"--workers {workers}: the cluster has {slots} {'GPU' if gpus else 'CPU'}(s), so only {slots} "
            "workers can run; ask for fewer or add nodes"
        )
    items = [{"index": index, "payload": pickle.dumps(payload, protocol=5)} for index, payload in chunks]
    dataset = ray.data.from_items(items, override_num_blocks=len(items))
    mapped = dataset.map_batches(
        ChunkWorker,
        fn_constructor_kwargs={"spec": spec.as_dict(), "threads": _threads(have, workers, gpus)},
        compute=ray.data.ActorPoolStrategy(size=workers),
        batch_size=1,
        batch_format="numpy",
        **per_actor,
    )
    seen: set[bytes] = set()
    for batch in mapped.iter_batches(batch_size=1, batch_format="numpy", prefetch_batches=0):
        for index, result, ident in zip(batch["index"], batch["result"], batch["identity"]):
            if ident not in seen:
                seen.add(ident)
                identity(pickle.loads(ident))
            yield int(index), pickle.loads(result)


def _threads(have: dict[str, float], workers: int, gpus: int) -> int | None:
    """Torch threads per CPU actor: the local machine's cores shared among the actors (None on a GPU)."""
    if gpus:
        return None
    per_node = os.cpu_count() or 1
    return max(1, min(per_node, int(have["CPU"]) // max(1, workers)))
