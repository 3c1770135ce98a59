"""Offline language detection (mlse.text.language_id) on real Tatoeba sentences and on the edge cases the app meets."""

from __future__ import annotations

import pytest

from mlse.data import load_tatoeba
from mlse.text import language_id
from mlse.text.language_id import PROJECT_LANGUAGES, UNDETERMINED, detect_language, language_choices, language_name

# ISO 639-1 code -> Tatoeba file code; accuracy floor on the first 60 sentences (short, hard: 2-8 words each).
# Measured on 150 sentences: 0.89 (pt) to 1.0 (ja); Russian / Ukrainian without a telling letter are the weakest.
TATOEBA = {
    "de": "deu",
    "es": "spa",
    "fr": "fra",
    "it": "ita",
    "nl": "nld",
    "pl": "pol",
    "pt": "por",
    "ru": "rus",
    "uk": "ukr",
    "zh": "cmn",
    "ar": "ara",
    "tr": "tur",
    "ja": "jpn",
}
N, FLOOR = 60, 0.8


def _sentences(corpus, side: str) -> list[str]:
    return [s for s in getattr(corpus, side) if s.strip()][:N]


@pytest.mark.parametrize("code", sorted(TATOEBA))
def test_detects_tatoeba_sentences(code, data_dir):
    corpus = load_tatoeba(TATOEBA[code], data_dir)
    found = [detect_language(s)[0] for s in _sentences(corpus, "src")]
    accuracy = sum(f == code for f in found) / len(found)
    assert accuracy >= FLOOR, (code, accuracy, found)


def test_detects_english_side(data_dir):
    found = [detect_language(s)[0] for s in _sentences(load_tatoeba("deu", data_dir), "tgt")]
    assert sum(f == "en" for f in found) / len(found) >= 0.9


def test_confidence_is_a_probability_and_long_text_is_sure():
    code, confidence = detect_language("Der Zug hatte heute Morgen Verspätung, weil es nachts stark geschneit hat.")
    assert code == "de" and 0.9 <= confidence <= 1.0


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("猫がテーブルの下で寝ている。", "ja"),  # kana: Japanese even though most characters are Han
        ("我不知道我有沒有時間。", "zh"),  # Traditional Chinese, which langid alone calls Japanese
        ("고양이가 자고 있다.", "ko"),
        ("Η γάτα κοιμάται.", "el"),
        ("Я люблю читати книжки ввечері.", "uk"),  # і
        ("Кошка спит на диване.", "ru"),  # no telling letter; langid alone says Macedonian
        ("Мы были там вчера.", "ru"),  # ы
    ],
)
def test_script_and_letter_rules(text, code):
    assert detect_language(text)[0] == code


@pytest.mark.parametrize("text", [None, "", "   ", "12345 !?", "🙂🙂", "\x00\x07"])
def test_text_without_letters_is_undetermined(text):
    assert detect_language(text) == (UNDETERMINED, 0.0)


def test_very_long_text_is_quick_and_decided():
    code, _ = detect_language("Das ist ein Satz. " * 10_000)  # only the first MAX_DETECT_CHARS are read
    assert code == "de"


def test_without_langid_script_rules_still_answer(monkeypatch):
    monkeypatch.setattr(language_id, "_langid_model", lambda: None)
    assert detect_language("Кошка спит на диване.")[0] == "ru"
    assert detect_language("狗在院子里跑。")[0] == "zh"
    assert detect_language("A man is playing a flute.") == (UNDETERMINED, 0.0)
    assert "langid not installed" in language_id.detector_name()


def test_language_names_and_choices():
    choices = language_choices()
    codes = [c for _, c in choices]
    assert codes[: len(PROJECT_LANGUAGES)] == list(PROJECT_LANGUAGES) and len(set(codes)) == len(codes)
    assert ("German (de)", "de") in choices and language_name("de") == "German"
    assert language_name("xx") == "xx" and language_name(UNDETERMINED) == "undetermined"
