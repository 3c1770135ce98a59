"""The one reader of users' files (mlse.data.user_files): every problem's exact message, every format and kind, header
detection and the table's helpers. Property tests live in tests/data/test_user_files_properties.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlse.data.user_files import parse_range, read_pairs, read_rows, read_table
from mlse.data.user_table_builder import MAX_LISTED
from mlse.errors import DataError

EXPECT_PAIRS = "(expected rows of sentence1, sentence2 and an optional score)"


def refused(source=None, **options) -> str:
    """The one message the reader refuses ``source`` (bytes, a path) or ``text=`` with."""
    with pytest.raises(DataError) as info:
        read_table(source, **options)
    return str(info.value)


def pairs_refused(text: str, **options) -> str:
    return refused(kind="pairs", text=text, **options)


# -- one test per problem, with its exact message ---------------------------------------------------------------------
def test_a_row_with_too_few_fields_names_its_line_and_the_missing_column():
    assert pairs_refused("sentence1\tsentence2\tscore\na\tb\t1\nc\td\n", name="p.tsv") == (
        "p.tsv:3: column 'score': missing (the row has 2 field(s), expected 3: sentence1, sentence2, score)"
    )
    assert pairs_refused("a\tb\t1\nc\td\n") == "pasted text:2: column 3: missing (the row has 2 field(s), expected 3)"


def test_a_row_with_too_many_fields_names_the_first_extra_column():
    assert pairs_refused("a\tb\t1\nc\td\t2\tx\n", name="p.tsv") == (
        "p.tsv:2: column 4: unexpected extra field (the row has 4 field(s), expected 3)"
    )
    assert pairs_refused("sentence1,sentence2\na,b,c\n", format="csv") == (
        "pasted text:2: column 3: unexpected extra field (the row has 3 field(s), expected 2: sentence1, sentence2)"
    )


def test_an_empty_sentence_is_refused_by_column_name_or_position():
    assert pairs_refused("a\t \t1\n") == "pasted text:1: column 2: empty sentence"
    assert pairs_refused("s1\ts2\nx\ty\n\tz\n", name="f.tsv") == "f.tsv:3: column 's1': empty sentence"
    assert refused(text="sentence\tlang\n\ten\n", kind="sentences") == (
        "pasted text:2: column 'sentence': empty sentence"
    )
    assert refused(text="en\tde\nhi\t\n", kind="parallel") == "pasted text:2: column 'de': empty sentence"


def test_a_score_that_is_no_number_is_refused():
    assert pairs_refused("a\tb\t1\nc\td\tgood\n") == "pasted text:2: column 3: expected a number, got 'good'"
    assert pairs_refused("sentence1\tsentence2\tscore\nc\td\tnan\n") == (
        "pasted text:2: column 'score': expected a number, got 'nan'"
    )


def test_a_decimal_comma_gets_a_hint():
    assert pairs_refused("a\tb\t3,5\n") == (
        "pasted text:1: column 3: expected a number, got '3,5'; write decimals with a dot (3.5, not 3,5)"
    )


def test_a_score_outside_its_stated_range_is_refused():
    assert pairs_refused("a\tb\t5\nc\td\t5.5\n", gold_range=(0, 5)) == (
        "pasted text:2: column 3: score 5.5 is outside the stated range [0, 5]"
    )
    assert len(read_pairs(text="a\tb\t0\nc\td\t5\n", gold_range=(0, 5))) == 2  # the ends are inside
    assert pairs_refused("a\tb\t1\n", gold_range=(5, 0)) == "score range [5, 0]: expected two numbers, low < high"


def test_a_duplicate_header_is_refused_whatever_its_case():
    assert pairs_refused("sentence1\tSentence1\tsentence2\na\tb\tc\n") == (
        "pasted text:1: column 'Sentence1' appears twice in the header (columns 1 and 2)"
    )
    assert pairs_refused("\nsentence1,sentence2,score,score\n", format="csv") == (
        "pasted text:2: column 'score' appears twice in the header (columns 3 and 4)"
    )


def test_a_header_cell_without_a_name_is_refused():
    assert pairs_refused("sentence1\t\tsentence2\na\tb\tc\n") == "pasted text:1: column 2 of the header has no name"


def test_binary_files_are_refused_and_named_by_what_they_are():
    assert refused(b"ab\x00cd\tef\n", name="x.tsv") == (
        "x.tsv: not a text file (it holds NUL bytes); expected UTF-8 text: TSV, CSV or JSONL"
    )
    assert refused(b"a\tb\n" * 30000 + b"\x00", name="late.tsv").startswith("late.tsv: not a text file")
    assert refused(b"PK\x03\x04\x14\x00", name="book.xlsx") == (
        "book.xlsx: not a text table: a zip archive or a spreadsheet (.xlsx, .ods); save it as CSV or TSV"
    )
    assert refused("a\tb\n".encode("utf-16"), name="w.tsv") == "w.tsv: not a text table: UTF-16 text; save it as UTF-8"
    assert refused(b"\x1f\x8b\x08\x00", name="p.gz") == "p.gz: not a text table: a gzip archive; unpack it first"


def test_invalid_utf8_names_the_line_and_byte():
    assert refused(b"a\tb\nc\td\xe9\n", name="latin.tsv") == (
        "latin.tsv:2: not valid UTF-8 (byte offset 7); save the file as UTF-8"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", f"pasted text: no rows found {EXPECT_PAIRS}"),
        ("\n \n\t\n", f"pasted text: no rows found {EXPECT_PAIRS}"),
        ("sentence1\tsentence2\n", f"pasted text: no rows found {EXPECT_PAIRS}"),
    ],
)
def test_no_rows(text, message):
    assert pairs_refused(text) == message


def test_no_rows_when_every_row_is_refused_names_the_first_problem():
    assert pairs_refused("a\t\nb\t\n", bad_rows="skip") == (
        "pasted text: no usable rows: all 2 were refused; the first: pasted text:1: column 2: empty sentence"
    )


def test_no_rows_says_what_each_accepted_kind_expects():
    assert refused(text="", kind=("sentences", "parallel")) == (
        "pasted text: no rows found (expected rows of one sentence per row or one column per language)"
    )


def test_a_header_without_sentence2_is_refused():
    assert pairs_refused("sentence1\tscore\nx\t3\n") == (
        "pasted text:1: no column for sentence2 (expected one named sentence2, sentence_2, s2, text2; "
        "the header has 'sentence1', 'score')"
    )
    assert pairs_refused("\n\nsentence2\tscore\nx\t3\n") == (  # the header's own line, after blank lines
        "pasted text:3: no column for sentence1 (expected one named sentence1, sentence_1, s1, text1; "
        "the header has 'sentence2', 'score')"
    )


def test_a_header_for_another_kind_is_refused():
    assert pairs_refused("sentence\tlang\nhello\ten\n") == (
        "pasted text:1: the header has 'sentence', 'lang'; expected columns named sentence1 and sentence2 "
        "(optional: score, lang1, lang2)"
    )


def test_headerless_columns_of_the_wrong_count_are_refused():
    assert pairs_refused("one sentence\nanother\n") == (
        "pasted text:1: 1 column(s) and no header; expected 2 or 3 (sentence1, sentence2[, score]), "
        "or a header naming the columns"
    )


def test_an_invalid_jsonl_line_is_refused():
    text = '{"sentence1": "a", "sentence2": "b"}\n{"sentence1": "c" "sentence2": "d"}\n'
    assert pairs_refused(text) == "pasted text:2: not valid JSON (Expecting ',' delimiter, character 19)"
    assert pairs_refused('{"sentence1": "a"\n') == (
        "pasted text:1: not valid JSON (Expecting ',' delimiter, character 18)"
    )


def test_json_lines_that_no_reader_could_take_are_refused_not_crashed():
    ok = '{"sentence1": "a", "sentence2": "b"}\n'
    long_number = '{"x": ' + "1" * 5000 + "}\n"
    assert pairs_refused(ok + long_number) == "pasted text:2: not valid JSON (a number too long to read)"
    assert pairs_refused(ok + "[" * 100_000 + "\n") == "pasted text:2: not valid JSON (nested too deeply)"


def test_a_json_value_that_is_not_an_object_is_refused():
    assert pairs_refused('{"sentence1": "a", "sentence2": "b"}\n[1, 2]\n') == (
        "pasted text:2: expected a JSON object, got list"
    )
    assert pairs_refused('{"sentence1": "a", "sentence2": "b"}\n"text"\n') == (
        "pasted text:2: expected a JSON object, got str"
    )
    assert refused(b'"just text"\n', name="x.jsonl", kind="pairs") == "x.jsonl:1: expected a JSON object, got str"


def test_a_json_array_file_gets_one_message():
    array = json.dumps([{"sentence1": "a", "sentence2": "b"}], indent=1).encode()
    assert refused(array, name="pairs.json", kind="pairs") == (
        "pairs.json: a JSON array; expected JSON Lines: one {...} object per line, no [ ]"
    )


def test_a_missing_required_jsonl_key_is_refused():
    text = (
        '{"sentence1": "a", "sentence2": "b", "score": 1}\n{"sentence1": "c", "score": 2}\n{"sentence1": "e", '
        '"sentence2": "f"}\n'
    )
    assert pairs_refused(text) == "pasted text:2: key 'sentence2' is missing"
    table = read_pairs(text=text, bad_rows="skip")
    assert [str(p) for p in table.skipped] == [
        "pasted text:2: key 'sentence2' is missing",
        "pasted text:3: key 'score' is missing",
    ]


def test_csv_quoting_errors_name_the_line_where_the_record_starts():
    assert pairs_refused('a,b\n"c\nd",e\nf,"g"h\n', format="csv") == (
        "pasted text:4: not valid CSV: ',' expected after '\"'; quote fields that hold commas or quotes with "
        '"..." and double a quote inside one ("")'
    )
    assert pairs_refused('a,b\nc,"d\ne,f\n', format="csv") == (
        'pasted text:2: not valid CSV: a quoted field opened on this line is never closed (a missing ")'
    )
    # past the csv module's default field limit (131,072 characters), an unclosed quote reads as what it is
    assert pairs_refused('a,b\nc,"d\n' + "x" * 140_000 + "\ny,z\n", format="csv") == (
        'pasted text:2: not valid CSV: a quoted field opened on this line is never closed (a missing ")'
    )


def test_a_csv_field_of_megabytes_is_read():
    """A 50 MB sentence is read, not refused (the encoders cut it to what a model reads); csv's default limit is
    131,072 characters."""
    long = "word, and " * 300_000  # 3 MB, commas and spaces inside a quoted field
    table = read_pairs(text=f'sentence1,sentence2\n"{long}",short\nb,c\n', format="csv")
    assert table.role("sentence1") == [long, "b"] and table.role("sentence2") == ["short", "c"]


def test_too_many_rows_and_bytes():
    assert pairs_refused("a\tb\nc\td\ne\tf\n", max_rows=2) == "pasted text: more than 2 rows, the limit here"
    assert pairs_refused("a\tb\nc\td\n", max_rows=1) == "pasted text: more than 1 row, the limit here"
    assert len(read_pairs(text="a\tb\nc\td\n", max_rows=2)) == 2
    assert pairs_refused("a\tb\n", max_bytes=3) == "pasted text: 4 bytes is over the limit of 3 bytes"
    assert len(read_pairs(text="a\tb\n", max_bytes=4)) == 1


def test_a_file_over_max_bytes_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = tmp_path / "big.tsv"
    path.write_text("a\tb\n" * 1000)

    def no_reading(self):
        raise AssertionError("read a file over the limit")

    monkeypatch.setattr(type(path), "read_bytes", no_reading)
    assert refused(path, kind="pairs", max_bytes=100) == "big.tsv: 4,000 bytes is over the limit of 100 bytes"


def test_a_path_is_named_by_its_file_name_or_the_name_given(tmp_path):
    assert refused(tmp_path / "nope.tsv", kind="pairs") == "nope.tsv: file not found"
    assert refused(tmp_path, kind="pairs", name="upload.tsv") == "upload.tsv: is a folder, expected a file"
    (tmp_path / "bad.tsv").write_text("a\t\n")
    assert refused(tmp_path / "bad.tsv", kind="pairs", name="mine.tsv") == "mine.tsv:1: column 2: empty sentence"
    assert str(tmp_path) not in refused(tmp_path / "bad.tsv", kind="pairs")


def test_bad_arguments_are_refused():
    assert refused(kind="pairs") == "give either a file or pasted text"
    assert refused(text="a\tb", format="xlsx") == "unknown format 'xlsx'; expected one of tsv, csv, jsonl, lines"
    with pytest.raises(ValueError, match="bad_rows"):
        read_table(text="a\tb", bad_rows="ignore")
    with pytest.raises(ValueError, match="kind must be"):
        read_table(text="a\tb", kind="triples")


# -- formats ----------------------------------------------------------------------------------------------------------
def test_tsv_keeps_quotes_and_commas_as_text():
    table = read_pairs(text='"A" man, he said\tit\'s "fine"\t4.5\n')
    assert table.rows == [['"A" man, he said', 'it\'s "fine"', "4.5"]]
    assert table.format == "tsv" and table.gold.tolist() == [4.5]


def test_csv_with_quoted_commas_quotes_and_a_multiline_field_keeps_line_numbers():
    text = 'sentence1,sentence2,score\n"Hello, world","She said ""hi""",1\n"two\nlines\nhere",b,2\nc,d,3\ne,,4\n'
    with pytest.raises(DataError, match=r"^pasted text:7: column 'sentence2': empty sentence$"):
        read_pairs(text=text, format="csv")
    table = read_pairs(text=text.replace("e,,4", "e,f,4"), format="csv")
    assert table.rows[0] == ["Hello, world", 'She said "hi"', "1"]
    assert table.rows[1][0] == "two\nlines\nhere"
    assert table.lines == [2, 3, 6, 7]


def test_jsonl_numbers_missing_optional_keys_and_extra_keys():
    text = (
        '{"sentence1": "a", "sentence2": "b", "score": 3, "lang1": "en", "note": {"x": 1}}\n'
        '{"sentence1": "c", "sentence2": "d", "score": 2.5, "id": 7}\n\n'
        '{"sentence2": "f", "sentence1": "e", "score": 0, "lang1": null}\n'
    )
    table = read_pairs(text=text)
    assert table.format == "jsonl" and table.has_header
    assert table.columns == ["sentence1", "sentence2", "score", "lang1", "note", "id"]
    assert table.rows == [
        ["a", "b", "3", "en", '{"x": 1}', ""],
        ["c", "d", "2.5", "", "", "7"],
        ["e", "f", "0", "", "", ""],
    ]
    assert table.lines == [1, 2, 4]
    assert table.roles == {"sentence1": "sentence1", "sentence2": "sentence2", "gold": "score", "lang1": "lang1"}
    assert table.gold.tolist() == [3.0, 2.5, 0.0]


@pytest.mark.parametrize(
    ("text", "fmt", "kind"),
    [
        ("a\tb\t1\n", "tsv", "pairs"),
        ("one sentence, with a comma\nanother\n", "lines", "sentences"),
        ('{"sentence": "x"}\n', "jsonl", "sentences"),
        ('  {"sentence1": "x", "sentence2": "y"}\n', "jsonl", "pairs"),
        ("a,b,1\n", "csv", "pairs"),
    ],
)
def test_pasted_text_format_is_guessed(text, fmt, kind):
    table = read_table(text=text, kind=kind)
    assert (table.format, table.kind) == (fmt, kind)


def test_a_file_suffix_decides_the_format():
    assert refused(b"a,b\n", name="x.tsv", kind="pairs").startswith("x.tsv:1: 1 column(s) and no header")
    assert read_pairs(b"a\tb,c\td\n", name="x.csv").columns == ["column1", "column2"]
    assert read_pairs(b"a\tb,c\td\n", name="x.csv").rows == [["a\tb", "c\td"]]
    assert read_pairs(b"a,x\tb\n", name="x.tab").rows == [["a,x", "b"]]
    assert read_pairs(b'{"s1": "a", "s2": "b"}\n', name="x.ndjson").roles["sentence2"] == "s2"


def test_bom_and_crlf():
    table = read_pairs("\ufeffsentence1\tsentence2\r\na\tb\r\nc\td\r\n".encode(), name="w.tsv")
    assert table.columns == ["sentence1", "sentence2"] and table.rows == [["a", "b"], ["c", "d"]]
    table = read_pairs('\ufeffsentence1,sentence2\r\n"x\r\ny",b\r\n'.encode(), name="w.csv")
    assert table.columns == ["sentence1", "sentence2"] and table.rows == [["x\r\ny", "b"]]


@pytest.mark.parametrize("separator", ["\u0085", "\u2028", "\u2029", "\r", "\x0b", "\x0c", "\x1c"])
@pytest.mark.parametrize("fmt", ["tsv", "csv", "jsonl", "lines"])
def test_unicode_line_separators_stay_inside_a_sentence(separator, fmt):
    s1, s2 = f"first{separator}half", f"x{separator}y"
    kind = "sentences" if fmt == "lines" else "pairs"
    if fmt == "jsonl":
        text = json.dumps({"sentence1": s1, "sentence2": s2}, ensure_ascii=False) + "\n"
    elif fmt == "csv":
        text = f'"{s1}","{s2}"\nb,c\n' if separator == "\r" else f"{s1},{s2}\nb,c\n"
    elif fmt == "lines":
        text = f"{s1}\nb\n"
    else:
        text = f"{s1}\t{s2}\nb\tc\n"
    table = read_table(text=text, kind=kind, format=fmt)
    assert table.rows[0] == ([s1] if fmt == "lines" else [s1, s2])
    assert table.lines[:2] == ([1] if fmt == "jsonl" else [1, 2])


def test_an_unquoted_carriage_return_in_csv_is_refused_at_its_line():
    assert pairs_refused("a,b\nc\rd,e\n", format="csv") == (
        "pasted text:2: not valid CSV: a carriage return (\\r) inside an unquoted field; quote the field"
    )


# -- header detection and columns -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "kind", "has_header"),
    [
        ("Sentence1\tTEXT_B\nx\ty\n", "pairs", True),  # a known name, any case
        ("Hello\ttext\nx\ty\n", "sentences", True),  # one known name is enough
        ("en\tde\nhello\thallo\n", "parallel", True),  # language codes
        ("eng\tzho_Hans\tfra\nhello\t你好\tsalut\n", "parallel", True),
        ("a\tb\tnan\nc\td\t1\n", "pairs", False),  # "nan" reads as a number: a row
        ("Hello\tHallo\tSalut\nYes\tJa\tOui\n", ("pairs", "parallel"), False),  # ... not over more text
        ("a\tb\t3\nc\td\t4\n", "pairs", False),
        ("Hello there\tHallo\n", "parallel", False),
        ("en\tde\n", "pairs", False),  # language codes head only a parallel table
    ],
)
def test_header_detection(text, kind, has_header):
    assert read_table(text=text, kind=kind, bad_rows="skip").has_header is has_header


@pytest.mark.parametrize("text", ["left\tright\tsimilarity\nx\ty\t3\n", "left\tright\tsimilarity\nx\ty\t3,5\n"])
def test_a_header_found_by_its_third_column_must_name_the_columns(text):
    assert pairs_refused(text) == (
        "pasted text:1: the header has 'left', 'right', 'similarity'; expected columns "
        "named sentence1 and sentence2 (optional: score, lang1, lang2)"
    )


def test_header_true_and_false_override_the_guess():
    assert read_table(text="en\tsentence\nx\ty\n", kind="parallel", header=False).languages == ["column1", "column2"]
    table = read_pairs(text="Satz 1\tSatz 2\tNote\nc\td\t4\n", header=True)  # the user's own names, by position
    assert table.columns == ["Satz 1", "Satz 2", "Note"] and table.roles["gold"] == "Note"
    assert table.gold.tolist() == [4.0] and table.lines == [2]
    with pytest.raises(DataError, match=r"^pasted text:2: column 'Note': expected a number, got 'gut'$"):
        read_pairs(text="Satz 1\tSatz 2\tNote\nc\td\tgut\n", header=True)
    with pytest.raises(DataError, match=r"^pasted text:1: the header has 'a', 'b', 'c', 'd'; expected columns named "):
        read_pairs(text="a\tb\tc\td\nc\td\te\tf\n", header=True)
    table = read_pairs(text="sentence1\tsentence2\nc\td\n", header=False)
    assert not table.has_header and table.rows == [["sentence1", "sentence2"], ["c", "d"]]
    assert table.columns == ["column1", "column2"] and table.lines == [1, 2]


def test_columns_by_name_in_any_order_and_case():
    table = read_pairs(text="Score\tid\tTEXT_B\tSentence1\n4\t7\tb\ta\n", name="mine.tsv")
    assert table.roles == {"gold": "Score", "sentence2": "TEXT_B", "sentence1": "Sentence1"}
    assert table.role("sentence1") == ["a"] and table.role("sentence2") == ["b"] and table.gold.tolist() == [4.0]
    assert table.columns == ["Score", "id", "TEXT_B", "Sentence1"] and table.role("lang1") is None
    spaced = read_pairs(text="sentence 1,Sentence-2,Gold Score\nx,y,1\n", format="csv")
    assert spaced.roles == {"sentence1": "sentence 1", "sentence2": "Sentence-2", "gold": "Gold Score"}


def test_columns_by_position():
    two = read_pairs(text="a\tb\n")
    assert two.roles == {"sentence1": "column1", "sentence2": "column2"} and two.gold is None
    three = read_pairs(text="a\tb\t2\n")
    assert three.roles == {"sentence1": "column1", "sentence2": "column2", "gold": "column3"}


def test_language_columns_of_pairs():
    table = read_pairs(text="Source_Lang,sentence1,sentence2,Language 2\nen,a,b,de\nfr,c,d,\n", format="csv")
    assert table.roles == {
        "lang1": "Source_Lang",
        "sentence1": "sentence1",
        "sentence2": "sentence2",
        "lang2": "Language 2",
    }
    assert table.role("lang1") == ["en", "fr"] and table.role("lang2") == ["de", ""]  # a language may be left empty


def test_sentences_with_language_and_id():
    table = read_table(text="id\ttext\tlanguage\n1\tHello\ten\n1\tHallo\tde\n2\tYes\ten\n", kind="sentences")
    assert table.kind == "sentences"
    assert table.roles == {"group": "id", "sentence": "text", "lang": "language"}
    assert table.role("group") == ["1", "1", "2"] and table.role("lang") == ["en", "de", "en"]
    plain = read_table(text="Hello\ten\nHallo\tde\n", kind="sentences")
    assert plain.roles == {"sentence": "column1", "lang": "column2"}
    one = read_table(text="Hello, you\nHallo\n", kind="sentences")
    assert one.roles == {"sentence": "column1"} and one.role("sentence") == ["Hello, you", "Hallo"]


def test_parallel_with_two_and_four_languages():
    two = read_table(text="en\tde\nHello\tHallo\nYes\tJa\n", kind="parallel")
    assert two.kind == "parallel" and two.languages == ["en", "de"] and two.roles == {}
    corpus = two.to_parallel()
    assert (corpus.src, corpus.tgt, corpus.src_lang, corpus.tgt_lang) == (["Hello", "Yes"], ["Hallo", "Ja"], "en", "de")
    four = read_table(text="id,en,de,fr,zho_Hans\n1,Yes,Ja,Oui,是\n", kind="parallel", format="csv")
    assert four.languages == ["en", "de", "fr", "zho_Hans"]
    corpus = four.to_parallel("fr", "zho_Hans")
    assert (corpus.src, corpus.tgt, corpus.src_lang, corpus.tgt_lang) == (["Oui"], ["是"], "fr", "zho_Hans")
    with pytest.raises(DataError, match=r"^pasted text: no column 'ru'; its languages are en, de, fr, zho_Hans$"):
        four.to_parallel("en", "ru")
    headerless = read_table(text="Hello\tHallo\tSalut\n", kind="parallel")
    assert headerless.languages == ["column1", "column2", "column3"]


def test_auto_kind_reads_three_text_columns_as_parallel_and_a_score_as_pairs():
    assert read_table(text="Hello\tHallo\tSalut\nYes\tJa\tOui\n").kind == "parallel"
    assert read_table(text="Hello\tHallo\t4\n").kind == "pairs"
    assert read_table(text="sentence\tlang\nHello\ten\n").kind == "sentences"
    assert read_table(text="Hello\tHallo\n", kind=("sentences", "parallel")).kind == "parallel"
    assert read_table(text="Hello\ten\nHallo\tde\n", kind=("sentences", "parallel")).kind == "sentences"


def test_to_scored_pairs():
    pairs = read_pairs(text="a\tb\t1.5\nc\td\t4\n", name="my pairs.tsv").to_scored_pairs()
    assert (pairs.s1, pairs.s2, pairs.name) == (["a", "c"], ["b", "d"], "my pairs")
    np.testing.assert_array_equal(pairs.scores, [1.5, 4.0])
    with pytest.raises(DataError, match=r"^pasted text: no score column, so it cannot be compared with gold"):
        read_pairs(text="a\tb\n").to_scored_pairs()
    with pytest.raises(DataError, match=r"^pasted text: expected parallel columns \(one per language\), got a pairs"):
        read_pairs(text="a\tb\n").to_parallel()


def test_frame_keeps_every_column_and_the_gold_as_numbers():
    frame = read_pairs(text="sentence1\tsentence2\tscore\tnote\na\tb\t2.5\t\n").frame()
    assert list(frame.columns) == ["sentence1", "sentence2", "score", "note"]
    assert frame["score"].dtype == np.float64 and frame.iloc[0].tolist() == ["a", "b", 2.5, ""]


def test_skipped_rows_are_counted_and_listed():
    good = "a\tb\t1\n"
    text = good + "".join(f"c{i}\t\t1\n" for i in range(MAX_LISTED + 5)) + "x\ty\tz\n" + good
    table = read_pairs(text=text, bad_rows="skip")
    assert len(table) == 2 and table.lines == [1, MAX_LISTED + 8]
    assert table.n_skipped == MAX_LISTED + 6 and len(table.skipped) == MAX_LISTED
    first = table.skipped[0]
    assert (first.line, first.column, first.message) == (2, "2", "empty sentence")
    assert str(first) == "pasted text:2: column 2: empty sentence"


def test_a_row_problem_without_a_column():
    table = read_pairs(text='{"sentence1": "a", "sentence2": "b"}\n7\n', bad_rows="skip")
    assert str(table.skipped[0]) == "pasted text:2: expected a JSON object, got int"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0:5", (0.0, 5.0)),
        ("0-5", (0.0, 5.0)),
        ("0,5", (0.0, 5.0)),
        ("1..5", (1.0, 5.0)),
        (" -1 : 1 ", (-1.0, 1.0)),
        ("0 - 5", (0.0, 5.0)),
        ("-1-1", (-1.0, 1.0)),
        ("0.5..4.5", (0.5, 4.5)),
        ("", None),
        (None, None),
        ("  ", None),
    ],
)
def test_parse_range(text, expected):
    assert parse_range(text) == expected


@pytest.mark.parametrize("text", ["5:0", "1:1", "a:b", "0 5", "1:2:3", "inf:5", "0:", "5"])
def test_parse_range_refuses(text):
    with pytest.raises(DataError) as info:
        parse_range(text)
    assert str(info.value) == f"score range {text!r}: expected LOW:HIGH with LOW < HIGH, e.g. 0:5"


# -- rows already split (the library's tuples and DataFrames) ---------------------------------------------------------
def test_read_rows_keeps_tabs_and_line_breaks_and_names_rows_from_one():
    table = read_rows([("a\tb", "c\nd", 3), ("e", "f", np.float64(2.5))], columns=["sentence1", "sentence2", "score"])
    assert table.rows == [["a\tb", "c\nd", "3"], ["e", "f", "2.5"]] and table.lines == [1, 2]
    assert table.gold.tolist() == [3.0, 2.5] and table.format == "rows"
    with pytest.raises(DataError, match=r"^pairs:2: column 1: empty sentence$"):
        read_rows([("a", "b"), (None, "c")], name="pairs")
    with pytest.raises(DataError, match=r"^rows:1: column 'score': expected a number, got ''$"):
        read_rows([("a", "b", float("nan"))], columns=["sentence1", "sentence2", "score"])
    with pytest.raises(DataError, match=r"^rows: column 'x' appears twice in the header \(columns 1 and 2\)$"):
        read_rows([("a", "b")], columns=["x", "x"])


def test_jsonl_keys_that_differ_only_in_case_name_both_lines():
    text = '{"sentence1": "a", "sentence2": "b"}\n{"sentence1": "c", "Sentence2 ": "d"}\n'
    assert pairs_refused(text) == (
        "pasted text:2: key 'Sentence2 ' and key 'sentence2' (line 1) differ only in case or spaces"
    )


def test_a_comma_separated_file_named_tsv_gets_a_hint():
    assert refused(b"a,b,1\nc,d,2\n", name="x.tsv", kind="pairs") == (
        "x.tsv:1: 1 column(s) and no header; expected 2 or 3 (sentence1, sentence2[, score]), or a header naming the "
        "columns; the rows hold no tab but commas: a CSV file? (name it .csv)"
    )


@pytest.mark.parametrize(
    ("header", "languages"),
    [("EN\tDE", ["EN", "DE"]), ("en-US\tpt_BR", ["en-US", "pt_BR"]), ("eng\tdeu_Latn", ["eng", "deu_Latn"])],
)
def test_language_code_headers_in_upper_case_or_with_a_region(header, languages):
    table = read_table(text=f"{header}\nYes\tJa\n", kind="parallel")
    assert table.has_header and table.languages == languages and table.rows == [["Yes", "Ja"]]
    assert not read_table(text="Yes\tJa\nNo\tNein\n", kind="parallel").has_header  # capitalised words are rows
