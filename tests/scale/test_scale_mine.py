"""``python -m mlse mine``: the TSV equals LASER's ratio-margin mining (mine_candidates) on the model's embeddings,
also when both sides are cut into several shards searched one by one; the threshold filters; IVF visiting every list
gives the exact result and IVF-PQ the same pairs; the array 1:1 selection equals select_one_to_one."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mlse.cli.main import main
from mlse.evaluation.mining import mine_candidates, select_one_to_one, select_pairs
from mlse.models import load_model
from mlse.scale.mine import mine_files


def write_bitext(data_dir, folder: Path, n: int = 40, extra: int = 10) -> tuple[Path, Path]:
    """n translation pairs, the target side in another order, plus `extra` source lines without a translation."""
    base = Path(data_dir) / "wmt_newstest" / "2013"
    de = (base / "newstest2013.de").read_text(encoding="utf-8").split("\n")
    en = (base / "newstest2013.en").read_text(encoding="utf-8").split("\n")
    order = np.random.default_rng(0).permutation(n)
    src, tgt = folder / "src.txt", folder / "tgt.txt"
    src.write_text("\n".join(de[: n + extra]) + "\n", encoding="utf-8")
    tgt.write_text("\n".join(en[i] for i in order) + "\n", encoding="utf-8")
    return src, tgt


def expected(model_path, src: Path, tgt: Path) -> list[str]:
    model = load_model(str(model_path), cache=False)
    s = src.read_text(encoding="utf-8").splitlines()
    t = tgt.read_text(encoding="utf-8").splitlines()
    mined = mine_candidates(model.encode(s), model.encode(t), k=4, candidates=16)
    return [f"{sc:.6f}\t{s[i]}\t{t[j]}" for i, j, sc in mined]


def test_mine_writes_the_ratio_margin_pairs(tmp_path, tiny_bert, data_dir, capsys):
    src, tgt = write_bitext(data_dir, tmp_path)
    out = tmp_path / "mined.tsv"
    assert main(["mine", str(src), str(tgt), "--model", str(tiny_bert), "--out", str(out)]) == 0
    assert "exact search" in capsys.readouterr().err
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines == expected(tiny_bert, src, tgt) and len(lines) >= 20
    assert not (tmp_path / "mined.tsv.work").exists()
    scores = [float(line.split("\t")[0]) for line in lines]
    assert scores == sorted(scores, reverse=True)
    cut = scores[10]
    assert (
        main(["mine", str(src), str(tgt), "--model", str(tiny_bert), "--out", str(out), "--threshold", str(cut)]) == 0
    )
    kept = out.read_text(encoding="utf-8").splitlines()
    assert kept and all(float(line.split("\t")[0]) >= cut for line in kept) and len(kept) <= 11


def test_ivf_visiting_every_list_is_exact(tmp_path, tiny_bert, data_dir, capsys):
    src, tgt = write_bitext(data_dir, tmp_path)
    out = tmp_path / "mined.tsv"
    argv = [
        "mine",
        str(src),
        str(tgt),
        "--model",
        str(tiny_bert),
        "--out",
        str(out),
        "--index",
        "ivf",
        "--nprobe",
        "1000",
    ]
    assert main(argv) == 0
    assert "ivf, nprobe 1000 search" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8").splitlines() == expected(tiny_bert, src, tgt)


def test_sharded_search_gives_the_whole_search_result(tmp_path, tiny_bert, data_dir):
    src, tgt = write_bitext(data_dir, tmp_path)
    out = tmp_path / "mined.tsv"
    summary = mine_files(src, tgt, str(tiny_bert), out, shard_rows=16, index="exact")  # 4 and 3 shards a side
    assert summary["search"] == "exact" and set(summary["seconds"]) >= {"build", "search", "margin", "select"}
    assert out.read_text(encoding="utf-8").splitlines() == expected(tiny_bert, src, tgt)
    pq = mine_files(src, tgt, str(tiny_bert), tmp_path / "pq.tsv", shard_rows=16, index="ivf-pq", nprobe=1000)
    assert pq["search"] == "ivf-pq"
    exact = [line.split("\t") for line in expected(tiny_bert, src, tgt)]
    approx = [line.split("\t") for line in (tmp_path / "pq.tsv").read_text(encoding="utf-8").splitlines()]
    # every list visited and every candidate re-scored on fp16 vectors: the same pairs, scores within fp16 rounding
    assert {tuple(r[1:]) for r in approx} == {tuple(r[1:]) for r in exact}
    by_pair = {tuple(r[1:]): float(r[0]) for r in exact}
    assert max(abs(float(r[0]) - by_pair[tuple(r[1:])]) for r in approx) < 5e-3


def test_a_second_run_takes_up_the_kept_work_and_searches_nothing(tmp_path, tiny_bert, data_dir):
    src, tgt = write_bitext(data_dir, tmp_path)
    out = tmp_path / "mined.tsv"
    first = mine_files(src, tgt, str(tiny_bert), out, shard_rows=16, keep_work=True)
    mined = out.read_text(encoding="utf-8")
    again = mine_files(src, tgt, str(tiny_bert), out, shard_rows=16)  # every shard is done: nothing is redone
    assert "search" in first["seconds"] and "search" not in again["seconds"] and "build" not in again["seconds"]
    assert out.read_text(encoding="utf-8") == mined and not (tmp_path / "mined.tsv.work").exists()


def _greedy_one_to_one(fwd_ids, fwd_scores, bwd_ids, bwd_scores) -> list[tuple[int, int, float]]:
    """The oracle: the union of both directions' proposals (a pair once, its higher score), best first, ties by
    (src, tgt), accepted greedily 1:1, written with a dict and a sort."""
    best: dict[tuple[int, int], float] = {}
    for i, (j, sc) in enumerate(zip(fwd_ids.tolist(), fwd_scores.tolist())):
        if j >= 0:
            best[(i, j)] = max(sc, best.get((i, j), -np.inf))
    for j, (i, sc) in enumerate(zip(bwd_ids.tolist(), bwd_scores.tolist())):
        if i >= 0:
            best[(i, j)] = max(sc, best.get((i, j), -np.inf))
    used_src, used_tgt, out = set(), set(), []
    for (i, j), sc in sorted(best.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1])):
        if i not in used_src and j not in used_tgt:
            used_src.add(i)
            used_tgt.add(j)
            out.append((i, j, float(sc)))
    return out


def test_array_selection_equals_select_one_to_one():
    rng = np.random.default_rng(3)
    for n, m in ((30, 20), (7, 40), (200, 200)):
        fwd_ids = rng.integers(-1, m, n)
        bwd_ids = rng.integers(-1, n, m)
        # few distinct scores: many ties, broken by (src, tgt) in both
        fwd_scores = rng.integers(0, 5, n).astype(np.float32) / 4
        bwd_scores = rng.integers(0, 5, m).astype(np.float32) / 4
        want = _greedy_one_to_one(fwd_ids, fwd_scores, bwd_ids, bwd_scores)
        i, j, score = select_pairs(fwd_ids, fwd_scores, bwd_ids, bwd_scores)
        assert list(zip(i.tolist(), j.tolist(), score.tolist())) == want
        assert select_one_to_one(fwd_ids, fwd_scores, bwd_ids, bwd_scores) == want
