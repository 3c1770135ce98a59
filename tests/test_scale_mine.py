"""``python -m mlse mine``: the TSV equals LASER's ratio-margin mining (mine_candidates) on the model's embeddings,
the threshold filters, and the IVF path (beyond --exact-max) visiting every list gives the exact result."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mlse.cli.main import main
from mlse.evaluation.mining import mine_candidates
from mlse.models import load_model


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


def test_ivf_beyond_exact_max_visiting_every_list_is_exact(tmp_path, tiny_bert, data_dir, capsys):
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
        "--exact-max",
        "10",
        "--nprobe",
        "1000",
    ]
    assert main(argv) == 0
    assert "IVF" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8").splitlines() == expected(tiny_bert, src, tgt)
