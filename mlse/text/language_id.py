"""Offline language identification: which language is a sentence in?

langid.py (Lui & Baldwin, 2012; its naive-Bayes model ships in the pip package) with two adjustments for short
sentences: **script first** (kana -> ja, Hangul -> ko, Han without kana -> zh, Thai, Greek... decide alone) and **a
prior** (1 for :data:`PROJECT_LANGUAGES`, :data:`OTHER_LANGUAGE_PRIOR` for others), so short Russian is not called
Macedonian nor short Spanish Galician, while a long sentence still wins on its evidence. Without langid the script
alone answers (Latin: undetermined). Codes are ISO 639-1; ``"und"``: undetermined.
"""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np

UNDETERMINED = "und"

# The languages of the project's data (STS Multi MT, FLORES, Tatoeba-Challenge), first in every list shown.
PROJECT_LANGUAGES: dict[str, str] = {
    "en": "English",
    "de": "German",
    "es": "Spanish",
    "fr": "French",
    "it": "Italian",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "ru": "Russian",
    "uk": "Ukrainian",
    "zh": "Chinese",
    "ja": "Japanese",
    "ar": "Arabic",
    "tr": "Turkish",
    "cs": "Czech",
}

# Other languages langid knows, by name (for display; codes are langid's).
OTHER_LANGUAGES: dict[str, str] = {
    "af": "Afrikaans",
    "am": "Amharic",
    "an": "Aragonese",
    "as": "Assamese",
    "az": "Azerbaijani",
    "be": "Belarusian",
    "bg": "Bulgarian",
    "bn": "Bengali",
    "br": "Breton",
    "bs": "Bosnian",
    "ca": "Catalan",
    "cy": "Welsh",
    "da": "Danish",
    "dz": "Dzongkha",
    "el": "Greek",
    "eo": "Esperanto",
    "et": "Estonian",
    "eu": "Basque",
    "fa": "Persian",
    "fi": "Finnish",
    "fo": "Faroese",
    "ga": "Irish",
    "gl": "Galician",
    "gu": "Gujarati",
    "he": "Hebrew",
    "hi": "Hindi",
    "hr": "Croatian",
    "ht": "Haitian Creole",
    "hu": "Hungarian",
    "hy": "Armenian",
    "id": "Indonesian",
    "is": "Icelandic",
    "jv": "Javanese",
    "ka": "Georgian",
    "kk": "Kazakh",
    "km": "Khmer",
    "kn": "Kannada",
    "ko": "Korean",
    "ku": "Kurdish",
    "ky": "Kyrgyz",
    "la": "Latin",
    "lb": "Luxembourgish",
    "lo": "Lao",
    "lt": "Lithuanian",
    "lv": "Latvian",
    "mg": "Malagasy",
    "mk": "Macedonian",
    "ml": "Malayalam",
    "mn": "Mongolian",
    "mr": "Marathi",
    "ms": "Malay",
    "mt": "Maltese",
    "nb": "Norwegian Bokmål",
    "ne": "Nepali",
    "nn": "Norwegian Nynorsk",
    "no": "Norwegian",
    "oc": "Occitan",
    "or": "Odia",
    "pa": "Punjabi",
    "ps": "Pashto",
    "qu": "Quechua",
    "ro": "Romanian",
    "rw": "Kinyarwanda",
    "se": "Northern Sami",
    "si": "Sinhala",
    "sk": "Slovak",
    "sl": "Slovenian",
    "sq": "Albanian",
    "sr": "Serbian",
    "sv": "Swedish",
    "sw": "Swahili",
    "ta": "Tamil",
    "te": "Telugu",
    "th": "Thai",
    "tl": "Tagalog",
    "ug": "Uyghur",
    "ur": "Urdu",
    "vi": "Vietnamese",
    "vo": "Volapük",
    "wa": "Walloon",
    "xh": "Xhosa",
    "zu": "Zulu",
}

LANGUAGE_NAMES: dict[str, str] = {**PROJECT_LANGUAGES, **OTHER_LANGUAGES}

OTHER_LANGUAGE_PRIOR = 0.02  # prior weight of a language outside PROJECT_LANGUAGES (project languages: 1)

# Scripts that name one language on their own. (first code point, last code point, script)
_SCRIPT_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0370, 0x03FF, "Greek"),
    (0x0400, 0x052F, "Cyrillic"),
    (0x0530, 0x058F, "Armenian"),
    (0x0590, 0x05FF, "Hebrew"),
    (0x0600, 0x06FF, "Arabic"),
    (0x0750, 0x077F, "Arabic"),
    (0x0900, 0x097F, "Devanagari"),
    (0x0E00, 0x0E7F, "Thai"),
    (0x10A0, 0x10FF, "Georgian"),
    (0x1100, 0x11FF, "Hangul"),
    (0x3040, 0x30FF, "Kana"),
    (0x31F0, 0x31FF, "Kana"),
    (0x3130, 0x318F, "Hangul"),
    (0x3400, 0x4DBF, "Han"),
    (0x4E00, 0x9FFF, "Han"),
    (0xAC00, 0xD7AF, "Hangul"),
    (0xF900, 0xFAFF, "Han"),
    (0xFB50, 0xFDFF, "Arabic"),
    (0xFE70, 0xFEFF, "Arabic"),
    (0xFF66, 0xFF9F, "Kana"),
    (0x20000, 0x2FA1F, "Han"),
)
_SCRIPT_LANGUAGE = {"Greek": "el", "Armenian": "hy", "Hebrew": "he", "Thai": "th", "Georgian": "ka", "Hangul": "ko"}
# Without langid: the most likely project language of a script that several languages share.
_SCRIPT_FALLBACK = {"Arabic": "ar", "Devanagari": "hi", "Cyrillic": "ru"}

MAX_DETECT_CHARS = 1000  # the first thousand characters decide; more only costs time


def language_name(code: str) -> str:
    """'de' -> 'German'; unknown codes are returned as given."""
    return "undetermined" if code == UNDETERMINED else LANGUAGE_NAMES.get(code, code)


def language_choices() -> list[tuple[str, str]]:
    """(label, code) for a language picker: the project's languages first, then the others by name."""
    others = sorted(OTHER_LANGUAGES.items(), key=lambda kv: kv[1])
    return [(f"{name} ({code})", code) for code, name in [*PROJECT_LANGUAGES.items(), *others]]


def script_of(ch: str) -> str:
    """The script of one letter: one of the names in ``_SCRIPT_RANGES``, else 'Latin' or 'Other'."""
    cp = ord(ch)
    for lo, hi, script in _SCRIPT_RANGES:
        if lo <= cp <= hi:
            return script
    if cp < 0x0250 or 0x1E00 <= cp <= 0x1EFF:  # Basic Latin .. Latin Extended-B, Latin Extended Additional
        return "Latin"
    return "Other"


def script_counts(text: str) -> Counter:
    """How many letters of each script ``text`` has (digits, punctuation and spaces do not count)."""
    return Counter(script_of(ch) for ch in text if ch.isalpha())


def detect_language(text: str | None) -> tuple[str, float]:
    """Best guess of the language of ``text`` -> (ISO 639-1-ish code, confidence in [0, 1]).

    No letters: ``("und", 0.0)``. Confidence: the chosen language's posterior (by script: its letters' share)."""
    text = (text or "")[:MAX_DETECT_CHARS]
    counts = script_counts(text)
    letters = sum(counts.values())
    if letters == 0:
        return UNDETERMINED, 0.0
    by_script = _decide_by_script(counts, letters)
    if by_script is not None:
        return by_script
    script, n = counts.most_common(1)[0]
    candidates = None
    if script == "Cyrillic":
        code, candidates = _cyrillic(text)
        if code is not None:
            return code, 0.95 * n / letters
    model = _langid_model()
    if model is None:
        code = _SCRIPT_FALLBACK.get(script, UNDETERMINED)
        return code, (0.5 * n / letters if code != UNDETERMINED else 0.0)
    return model.classify(text, among=candidates)


def _decide_by_script(counts: Counter, letters: int) -> tuple[str, float] | None:
    """Japanese, Chinese, Korean, Thai, Greek, ... from the letters' script alone; None when the script is shared."""
    cjk = counts["Han"] + counts["Kana"]
    if cjk / letters >= 0.5:
        # any kana makes it Japanese (Chinese never uses kana); Han alone is Chinese
        return ("ja", cjk / letters) if counts["Kana"] else ("zh", counts["Han"] / letters)
    script, n = counts.most_common(1)[0]
    return (_SCRIPT_LANGUAGE[script], n / letters) if script in _SCRIPT_LANGUAGE else None


# Letters that only some Cyrillic orthographies use: (letters, language, or the languages langid chooses among).
# langid's n-grams alone often call short Russian Macedonian or Ukrainian.
_CYRILLIC_MARKERS: tuple[tuple[str, str | tuple[str, ...]], ...] = (
    ("әғқңұһ", "kk"),
    ("ў", "be"),
    ("іїєґ", "uk"),
    ("ѓќѕ", "mk"),
    ("ђћ", "sr"),
    ("јљњџ", ("sr", "mk")),
    ("ыэё", "ru"),
    ("ъ", ("ru", "bg")),
)
_CYRILLIC_LANGUAGES = ("ru", "uk")  # no telling letter: bg has ъ, mk and sr ј, kk its own letters


def _cyrillic(text: str) -> tuple[str | None, tuple[str, ...]]:
    """(language, ()) when a letter gives it away, else (None, the Cyrillic languages langid should choose among)."""
    lower = set(text.lower())
    for letters, verdict in _CYRILLIC_MARKERS:
        if lower & set(letters):
            return (verdict, ()) if isinstance(verdict, str) else (None, verdict)
    return None, _CYRILLIC_LANGUAGES


class _LangidModel:
    """langid's naive Bayes scores plus the project-language prior; one instance, shared by all threads."""

    def __init__(self):
        from langid.langid import LanguageIdentifier, model  # lazy: a packaged model's own library, loaded on first use

        self._identifier = LanguageIdentifier.from_modelstring(model, norm_probs=False)
        self.classes = [str(c) for c in self._identifier.nb_classes]
        self._log_prior = np.array(  # [n_classes]
            [0.0 if c in PROJECT_LANGUAGES else np.log(OTHER_LANGUAGE_PRIOR) for c in self.classes]
        )

    def posterior(self, text: str) -> np.ndarray:
        """Probabilities over :attr:`classes` [n_classes]."""
        fv = self._identifier.instance2fv(text)  # [n_features] n-gram counts, almost all zero
        # langid's nb_classprobs multiplies the whole vector by [n_features, n_classes]; the active features suffice.
        active = np.flatnonzero(fv)  # [n_active]
        log_likelihood = fv[active].astype(np.float64) @ self._identifier.nb_ptc[active]  # [n_classes]
        log_p = log_likelihood + self._identifier.nb_pc + self._log_prior  # [n_classes] unnormalised log posterior
        p = np.exp(log_p - log_p.max())
        return p / p.sum()

    def classify(self, text: str, among: tuple[str, ...] | None = None) -> tuple[str, float]:
        """(code, posterior) of the most likely language, optionally only ``among`` some codes."""
        p = self.posterior(text)  # [n_classes]
        if among:
            p = np.where(np.isin(self.classes, among), p, 0.0)
            p = p / p.sum() if p.sum() > 0 else p
        best = int(np.argmax(p))
        return self.classes[best], float(p[best])


_LOAD_LOCK = threading.Lock()
_loaded: list[_LangidModel | None] = []  # the one detector of the process, once loaded (None: langid not installed)


def _langid_model() -> _LangidModel | None:
    with _LOAD_LOCK:  # two first requests at once must not both unpack the model
        if not _loaded:
            try:
                _loaded.append(_LangidModel())  # ~1 s: decompresses the model shipped in the package
            except ImportError:
                _loaded.append(None)
        return _loaded[0]


def detector_name() -> str:
    """Which detector answers here (shown in the app so users know what the guess rests on)."""
    return "langid.py + script rules" if _langid_model() is not None else "script rules only (langid not installed)"
