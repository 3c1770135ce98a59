"""The command line, run in-process (``mlse.cli.main.main``) plus one real subprocess for the exit-code contract."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mlse.cli.main import main
from tests.paths import REPO_ROOT as REPO


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _assert_one_line_error(code: int, err: str, *fragments: str) -> str:
    """Exit 2 and exactly one stderr line, starting with ``error:`` (no traceback); returns that line."""
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def _model_rows(out: str) -> dict[str, str]:
    """name -> its whole table line."""
    return {line.split()[0]: line for line in out.splitlines()[2:] if line.strip()}


# -- models --------------------------------------------------------------------------------------------------------


def test_models_lists_offline_and_hub_models(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))  # not the user's real HF cache
    code, out, _ = _run(capsys, "models")
    assert code == 0
    header = out.splitlines()[0].split()
    assert header == ["name", "source", "status", "description", "location"]
    rows = _model_rows(out)
    assert "available offline" in rows["minilm-en"]
    assert "available offline (converted on first use)" in rows["me5-small"] and "'query: '" in rows["me5-small"]
    for name in ("labse", "xlmr"):
        assert "needs the hub" in rows[name] and "available" not in rows[name]


def test_models_with_a_local_hf_cache(capsys, fake_hub):
    code, out, _ = _run(capsys, "models")
    assert code == 0
    rows = _model_rows(out)
    assert "available (local HF cache)" in rows["labse"]
    assert "available (local HF cache)" in rows["xlmr"]
    assert "available offline" in rows["minilm-en"]


# -- eval: STS -----------------------------------------------------------------------------------------------------


def test_eval_sts_prints_a_table_writes_json_and_reuses_the_cache(capsys, tmp_path, tiny_bert):
    out_json = tmp_path / "res" / "sts.json"
    argv = ["eval", "--task", "sts", "--pairs", "en-en", "--model", str(tiny_bert), "--json-out", str(out_json)]
    code, out, _ = _run(capsys, *argv)
    assert code == 0
    assert "en-en" in out and "spearman" in out and "avg:all" in out
    assert f"wrote {out_json}" in out
    assert "encoded 0 texts" not in out
    obj = json.loads(out_json.read_text(encoding="utf-8"))
    assert {"model", "task", "split", "config", "data", "versions", "created", "scores"} <= set(obj)
    assert obj["task"] == "sts" and obj["split"] == "test" and obj["scores"]["en-en"]["n"] == 1379
    assert obj["model"] == "outside:tiny-bert"  # a local model outside the data, cache and repository: its name only
    assert obj["encode_stats"]["encoded"] > 0

    code, out2, _ = _run(capsys, *argv)
    assert code == 0
    assert "encoded 0 texts" in out2
    again = json.loads(out_json.read_text(encoding="utf-8"))
    assert again["scores"] == obj["scores"] and again["encode_stats"]["encoded"] == 0


def test_eval_sts_on_a_pairs_file(capsys, tmp_path, tiny_bert):
    tsv = tmp_path / "my.tsv"
    tsv.write_text(
        "A man plays a flute.\tA man is playing the flute.\t4.6\n"
        "A dog runs.\tThe market fell.\t0.2\n"
        "Kids play football.\tChildren are playing soccer.\t4.1\n"
        "She reads a book.\tA woman is reading.\t3.5\n",
        encoding="utf-8",
    )
    code, out, err = _run(capsys, "eval", "--task", "sts", "--pairs-file", str(tsv), "--model", str(tiny_bert))
    assert code == 0, err
    assert "my" in _model_rows(out.split("\n", 1)[1]) and "split file" in out


def test_eval_sts_malformed_pairs_file_names_file_and_line(capsys, tmp_path, tiny_bert):
    tsv = tmp_path / "bad.tsv"
    tsv.write_text("a\tb\t1.0\nc\td\t2.0\nonly one field\n", encoding="utf-8")
    code, _, err = _run(capsys, "eval", "--task", "sts", "--pairs-file", str(tsv), "--model", str(tiny_bert))
    _assert_one_line_error(code, err, f"{tsv}:3", "the row has 1 field(s), expected 3")


def test_eval_pairs_file_goes_through_the_one_reader(capsys, tmp_path, tiny_bert):
    """Any file ``score`` and the app read works here too (CSV, extra columns); without a score column: one line."""
    rated = tmp_path / "rated.csv"
    rated.write_text(
        'lang1,sentence1,sentence2,score\nen,"A man, smiling.",A man smiles.,4.5\n'
        "en,A dog runs.,The market fell.,0.2\nen,Kids play.,Children are playing.,4.0\n",
        encoding="utf-8",
    )
    code, out, err = _run(capsys, "eval", "--task", "sts", "--pairs-file", str(rated), "--model", str(tiny_bert))
    assert code == 0, err
    assert "rated" in _model_rows(out.split("\n", 1)[1])
    unrated = tmp_path / "unrated.tsv"
    unrated.write_text("a\tb\nc\td\n", encoding="utf-8")
    code, _, err = _run(capsys, "eval", "--task", "sts", "--pairs-file", str(unrated), "--model", str(tiny_bert))
    _assert_one_line_error(code, err, str(unrated), "no score column")


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        ("a\tb\thigh\n", [":1:", "'high'", "header"]),  # the only line's score is not a number: read as a header
        ("s1\ts2\tscore\na\tb\t3,5\n", [":2:", "'3,5'", "with a dot"]),  # a decimal comma
        ("a\tb\t1\nc\td\tn/a\n", [":2:", "'n/a'"]),
    ],
)
def test_eval_non_numeric_score_column_names_file_line_and_value(capsys, tmp_path, tiny_bert, content, fragments):
    tsv = tmp_path / "my_pairs.tsv"
    tsv.write_text(content, encoding="utf-8")
    code, _, err = _run(capsys, "eval", "--task", "sts", "--pairs-file", str(tsv), "--model", str(tiny_bert))
    _assert_one_line_error(code, err, str(tsv), *fragments)


# -- eval: user mistakes -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["--model", "nope", "--task", "sts", "--pairs", "en-de"], ["unknown model 'nope'", "minilm-en"]),
        (["--task", "sts", "--pairs", "en-xx"], ["unknown STS Multi MT language 'xx'"]),
        (["--task", "tatoeba"], ["--langs"]),
        (["--task", "tatoeba", "--langs", "deu,xyz"], ["unknown Tatoeba language 'xyz'"]),
        (["--task", "sts", "--pairs", "en-en", "--data-dir", "/no/such/folder"], ["/no/such/folder", "does not exist"]),
        (["--task", "mining", "--pair", "ja-en"], ["no WMT news test for mining pair 'ja-en'", "de-en"]),
        (["--task", "mining", "--n-gold", "1"], ["--n-gold", ">= 2"]),
        (["--task", "mining", "--n-gold", "5000"], ["too large"]),
        (["--task", "sts", "--pairs", "en-en", "--batch-size", "0"], ["--batch-size"]),
        (["--task", "sts"], ["no STS data selected"]),
    ],
    ids=[
        "unknown-model",
        "sts-lang",
        "tatoeba-no-langs",
        "tatoeba-lang",
        "data-dir",
        "mining-pair",
        "n-gold-small",
        "n-gold-large",
        "batch-size",
        "sts-nothing",
    ],
)
def test_eval_user_mistakes_exit_2_with_one_line(capsys, argv, fragments):
    named = [] if "--model" in argv else ["--model", "minilm-en"]  # never the default: it would convert e5 here
    code, out, err = _run(capsys, "eval", *named, *argv)
    _assert_one_line_error(code, err, *fragments)
    assert "Traceback" not in out


@pytest.mark.parametrize(
    "argv", [["eval", "--task", "nope"], ["eval"], ["frobnicate"], [], ["eval", "--task", "mining", "--n-gold", "x"]]
)
def test_argparse_errors_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


def test_subprocess_unknown_model_is_one_error_line():
    proc = subprocess.run(
        [sys.executable, "-m", "mlse", "eval", "--model", "nope", "--task", "sts", "--pairs", "en-de"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    error_lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and "unknown model 'nope'" in error_lines[0], proc.stderr
    assert proc.stdout == ""


def test_subprocess_score_with_a_bad_file_is_one_error_line(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("sentence1\tsentence2\tscore\na\tb\t1\nc\td\tlots\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "mlse", "score", str(bad), "--models", "minilm-en"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [f"error: {bad}:3: column 'score': expected a number, got 'lots'"]
    assert proc.stdout == ""


# -- eval: Tatoeba -------------------------------------------------------------------------------------------------


def test_eval_tatoeba_writes_error_lists(capsys, tmp_path, tiny_bert):
    errors_json = tmp_path / "e.json"
    code, out, err = _run(
        capsys,
        "eval",
        "--task",
        "tatoeba",
        "--langs",
        "deu,fra",
        "--model",
        str(tiny_bert),
        "--errors-out",
        str(errors_json),
    )
    assert code == 0, err
    assert "deu" in out and "fra" in out and "acc_mean" in out and f"wrote {errors_json}" in out
    errors = json.loads(errors_json.read_text(encoding="utf-8"))
    assert set(errors) == {"deu", "fra"}
    for lang in errors.values():
        assert set(lang) == {"to_en", "from_en"}
        assert lang["to_en"], "a tiny random model makes retrieval errors"
        first = lang["to_en"][0]
        assert {"index", "query", "retrieved", "gold", "sim_retrieved", "sim_gold", "rank_of_gold"} <= set(first)
        assert first["retrieved"] != first["gold"]


def test_eval_defaults_to_the_first_offline_default():
    from mlse.cli.main import build_parser
    from mlse.encoders.catalogue import DEFAULT_MODEL, DEFAULT_MODELS

    assert DEFAULT_MODEL == DEFAULT_MODELS[0] == "me5-small"
    assert build_parser().parse_args(["eval", "--task", "sts"]).model == DEFAULT_MODEL


def test_the_readme_example_pairs_file_evaluates(capsys, tiny_bert):
    """assets/examples/my_pairs.tsv is the README's ``--pairs-file`` example: it must exist and evaluate."""
    pairs = REPO / "assets" / "examples" / "my_pairs.tsv"
    code, out, err = _run(capsys, "eval", "--task", "sts", "--pairs-file", str(pairs), "--model", str(tiny_bert))
    assert code == 0, err
    assert "my_pairs" in out


def test_eval_tatoeba_all_means_every_language_in_the_data(capsys, tmp_path, tiny_bert, data_dir):  # noqa: F811
    from mlse.data.tatoeba import TATOEBA_DIR

    folder = tmp_path / "data" / TATOEBA_DIR
    folder.mkdir(parents=True)
    for code in ("fra", "afr"):
        for side in (code, "eng"):
            name = f"tatoeba.{code}-eng.{side}"
            (folder / name).symlink_to(data_dir / TATOEBA_DIR / name)
    out_json = tmp_path / "all.json"
    code, out, err = _run(
        capsys,
        "eval",
        "--task",
        "tatoeba",
        "--langs",
        "all",
        "--model",
        str(tiny_bert),
        "--data-dir",
        str(tmp_path / "data"),
        "--json-out",
        str(out_json),
    )
    assert code == 0, err
    assert sorted(json.loads(out_json.read_text(encoding="utf-8"))["scores"]) == ["afr", "fra"]
