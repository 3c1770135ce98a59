"""mlse.ui.text: the one rule every tab uses to show user text in markdown and in HTML."""

from __future__ import annotations

from mlse.ui.text import html_text, md_code, md_escape


def test_markdown_and_html_are_neutralised_on_one_line():
    # (from the score tab's own escaper)
    assert md_escape("<a href='x'>[link](y)</a>\n#h") == "&lt;a href='x'&gt;\\[link\\]\\(y\\)&lt;/a&gt; \\#h"


def test_emphasis_links_and_tags_show_literally():
    # (from the Tatoeba tab's escaper; a link target after "]" is now escaped too, as the score tab's was)
    out = md_escape("<script>x</script> **b** [a](u) # h")
    assert "<" not in out and "**" not in out and "\\*\\*b\\*\\*" in out and "\\[a\\]\\(u\\)" in out


def test_the_map_tables_rule():
    # (from the map tab's escaper)
    assert "<b>" not in md_escape("<b>bold</b> *x*") and "\\*x\\*" in md_escape("*x*")


def test_apostrophes_show_as_apostrophes():
    shown = md_escape("l'homme qu'il a vu & <b>")
    assert "&#x27;" not in shown and "l'homme" in shown and "&lt;b&gt;" in shown and "&amp;" in shown


def test_line_start_markers_are_escaped_only_at_the_start():
    assert md_escape("- x") == "\\- x" and md_escape("+ x") == "\\+ x" and md_escape("1. x") == "1\\. x"
    assert md_escape("12) x") == "12\\) x" and md_escape("=== x") == "\\=== x"
    assert md_escape("en-de scored 3.8 (of 5)!") == "en-de scored 3.8 (of 5)!"  # reads as written


def test_controls_go_and_whitespace_collapses():
    assert md_escape("a\x00b\u202e c \t\n d") == "ab c d"


def test_code_spans_and_html():
    assert md_code("runs/a_b`x\n <b>") == "runs/a_b'x &lt;b&gt;"  # no backslashes: they show in a code span
    assert html_text("<b>\"x\" & 'y'</b>") == "&lt;b&gt;&quot;x&quot; &amp; &#x27;y&#x27;&lt;/b&gt;"
