import sys

from mlse.ui.score_tab import MAX_CHARS, clean_text, load_examples, score_pair
from mlse.ui.state import AppState


def test_import_mlse_does_not_load_gradio():
    import subprocess

    code = "import sys, mlse, mlse.encoders, mlse.data, mlse.evaluation, mlse.tasks; print('gradio' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_clean_text_strips_control_chars_and_truncates():
    text, notice = clean_text("a\x00b\x07c" + "x" * (MAX_CHARS + 10))
    assert text.startswith("abc") and len(text) == MAX_CHARS and "truncated" in notice


def test_score_pair_handler(tiny_bert):
    state = AppState()
    rows, msg = score_pair(state, "A man plays a flute.", "Ein Mann spielt Flöte.", [str(tiny_bert)])
    assert len(rows) == 1 and -1.0 <= rows[0][1] <= 1.0 and msg == ""
    assert score_pair(state, "   ", "x", [str(tiny_bert)]) == ([], "Enter two non-empty sentences.")
    rows, msg = score_pair(state, "a", "b", ["no-such-model"])
    assert rows == [] and "unknown model" in msg


def test_examples_ship_with_the_seed_pair():
    examples = load_examples()
    assert len(examples) >= 6
    assert any("flute" in a and "bambou" in b for a, b in examples)
