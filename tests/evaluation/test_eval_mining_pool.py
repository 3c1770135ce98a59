"""mlse.evaluation.mining_pool: the distractor pools of ``mlse eval mining`` and of benchmarks/mining_scale.py, built
by one rule (disjoint halves), on hand-made sentences and on the real data (pinned to what the code gave before it
moved out of the benchmark)."""

from __future__ import annotations

import hashlib
import json

import pytest

from mlse.errors import DataError
from mlse.evaluation.mining_pool import (
    MiningPool,
    data_pool,
    disjoint_halves,
    gold_count,
    pool_composition,
    pool_from,
    pool_task,
)
from mlse.evaluation.runners import mining_sources


def _digest(items) -> str:
    return hashlib.sha256(json.dumps(items, ensure_ascii=False, default=str).encode()).hexdigest()[:16]


def test_disjoint_halves_keep_every_translation_apart():
    src, tgt = [f"x{i}" for i in range(7)], [f"e{i}" for i in range(7)]
    first, second = disjoint_halves(src, tgt)
    assert first == ["x0", "x1", "x2"] and second == ["e3", "e4", "e5", "e6"]
    assert not {(f"x{i}", f"e{i}") for i in range(7)} & {(s, t) for s in first for t in second}
    assert disjoint_halves([], []) == ([], [])


def _hand_made_pool(n_max: int = 100, seed: int = 0) -> tuple[MiningPool, list]:
    links = [(f"x{i}", f"e{i}") for i in range(300)]
    candidates = links[:80]  # gold only from these
    lang = {s: ("deu" if i % 2 else "fra") for i, (s, _) in enumerate(candidates)}
    other = [f"mono-x{i}" for i in range(60)]
    english = [f"mono-e{i}" for i in range(60)]
    origin = {t: "links" for pair in links for t in pair} | {t: "mono" for t in other + english}
    return pool_from(links, candidates, lang, other, english, origin, n_max, 0.1, seed, ["a.txt"]), links


def test_pool_from_hand_made_sentences():
    pool, links = _hand_made_pool()
    assert len(pool.gold) == gold_count(100, 0.1) == 10 and set(pool.gold) <= set(links[:80])
    assert pool.gold_lang == [("deu" if int(s[1:]) % 2 else "fra") for s, _ in pool.gold]
    src, tgt = {s for s, _ in pool.gold} | set(pool.src_extra), {t for _, t in pool.gold} | set(pool.tgt_extra)
    assert {(s, t) for s, t in links if s in src and t in tgt} == set(pool.gold)  # only gold crosses the pools
    assert {s for s in pool.src_extra if s.startswith("mono")} == {f"mono-x{i}" for i in range(60)}
    assert pool.sources == ["a.txt"]
    again, _ = _hand_made_pool()
    assert (again.gold, again.src_extra, again.tgt_extra) == (pool.gold, pool.src_extra, pool.tgt_extra)


def test_tasks_take_prefixes_and_state_their_composition():
    pool, links = _hand_made_pool()
    small, large = pool_task(pool, 50, 0.1, seed=3), pool_task(pool, 100, 0.1, seed=3)
    for n, task in ((50, small), (100, large)):
        assert len(task.src) == len(task.tgt) == n and len(task.gold) == gold_count(n, 0.1)
        assert all((task.src[i], task.tgt[j]) in set(links) for i, j in task.gold)
    assert set(small.src) <= set(large.src) and set(small.tgt) <= set(large.tgt)  # prefixes: embeddings reused
    comp = pool_composition(pool, large)
    assert comp["gold_pairs"] == 10 and comp["gold_fraction"] + comp["distractor_fraction"] == pytest.approx(1)
    assert sum(comp["src_distractors"].values()) == sum(comp["tgt_distractors"].values()) == 90
    assert sum(comp["gold_languages"].values()) == 10 and set(comp["gold_languages"]) <= {"deu", "fra"}
    with pytest.raises(DataError, match="N=1000: the pool has 10 gold pairs"):
        pool_task(pool, 1000, 0.1, seed=3)


def test_the_benchmark_pool_on_the_real_data_is_what_it_was(data_dir):
    pool = data_pool(2000, 0.1, 0, data_dir)
    assert (len(pool.gold), len(pool.src_extra), len(pool.tgt_extra), len(pool.sources)) == (200, 110026, 118590, 312)
    # digests of the pool and of a task computed with the benchmark's own builder before it moved here
    assert [_digest(pool.gold), _digest(pool.src_extra), _digest(pool.tgt_extra), _digest(pool.gold_lang)] == [
        "3a73bae20ec10b88",
        "d7de301eb26e97a4",
        "19e6a0bf75444853",
        "c853ad36c019d2f8",
    ]
    task = pool_task(pool, 1000, 0.1, 0)
    assert [_digest(task.src), _digest(task.tgt), _digest(sorted(task.gold))] == [
        "699eddddfe33068f",
        "e928181606222c10",
        "fe0562a40dc12e74",
    ]
    comp = pool_composition(pool, task)
    assert comp["src_distractors"] == {"tatoeba-challenge": 535, "laser-tatoeba": 299, "wmt": 62, "flores": 4}
    assert comp["tgt_distractors"] == {
        "tatoeba-challenge": 520,
        "laser-tatoeba": 220,
        "sts-en": 104,
        "wmt": 50,
        "flores": 6,
    }


@pytest.mark.parametrize(
    ("pair", "n_extra", "digests"),
    [
        ("de-en", 2006, ("204ad81150d66c46", "0ba657f2c7f74c3e")),
        ("cs-en", 506, ("bee7f584e07ac8f1", "44b535a75d406f88")),
    ],
)
def test_eval_mining_distractors_are_what_they_were(data_dir, pair, n_extra, digests):
    _, extra_src, extra_tgt, sources = mining_sources(pair, data_dir)
    assert len(extra_src) == len(extra_tgt) == n_extra
    names = [str(p.relative_to(data_dir)) for p in sources]
    assert (_digest(extra_src), _digest(extra_tgt)) == digests
    assert len(names) == len(set(names)) and all((data_dir / n).is_file() for n in names)
