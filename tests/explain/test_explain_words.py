"""Word pieces -> words (mlse.explain.words): WordPiece, SentencePiece, special tokens, the prompt, CJK, unknowns."""

from __future__ import annotations

from mlse.explain.words import TokenInfo, merge_words, piece_spans


def _tokens(text, pieces, special=None, prefix_chars=0):
    special = special or [p in ("[CLS]", "[SEP]", "<s>", "</s>") for p in pieces]
    return TokenInfo(text, tuple(range(len(pieces))), tuple(pieces), tuple(special), prefix_chars)


def test_wordpiece_pieces_merge_into_the_users_own_words():
    tok = _tokens("Ein Mann spielt Flöte.", ["[CLS]", "ein", "mann", "spielt", "fl", "##ote", ".", "[SEP]"])
    words = merge_words(tok)
    assert words.labels == ("[CLS]", "Ein", "Mann", "spielt", "Flöte", ".", "[SEP]")
    assert words.special == (True, False, False, False, False, False, True)
    assert words.word_of_token == (0, 1, 2, 3, 4, 4, 5, 6)


def test_sentencepiece_pieces_and_the_e5_prompt():
    text = "query: Ein Mann spielt Flöte."
    pieces = ["<s>", "\u2581query", ":", "\u2581Ein", "\u2581Mann", "\u2581spielt", "\u2581Fl", "öte", ".", "</s>"]
    words = merge_words(_tokens(text, pieces, prefix_chars=len("query: ")))
    assert words.labels == ("<s>", "query:", "Ein", "Mann", "spielt", "Flöte", ".", "</s>")
    assert words.special == (True, True, False, False, False, False, False, True)
    assert words.word_of_token == (0, 1, 1, 2, 3, 4, 5, 5, 6, 7)


def test_chinese_pieces_are_words_of_their_own_and_a_lone_marker_joins_the_next():
    text = "狗在院子里跑。"
    pieces = ["<s>", "\u2581", "狗", "在", "院子", "里", "跑", "。", "</s>"]
    words = merge_words(_tokens(text, pieces))
    assert words.labels == ("<s>", "狗", "在", "院子", "里", "跑", "。", "</s>")
    assert words.word_of_token[1] == words.word_of_token[2] == 1


def test_punctuation_at_the_edges_stands_alone_inside_a_word_it_stays():
    text = "(Don't) stop, U.S."
    pieces = ["(", "don", "'", "t", ")", "stop", ",", "u", ".", "s", "."]
    words = merge_words(_tokens(text, pieces, special=[False] * len(pieces)))
    assert words.labels == ("(", "Don't", ")", "stop", ",", "U.S", ".")


def test_an_unknown_piece_takes_the_text_between_its_neighbours():
    tok = _tokens("I like 🙂 tea", ["[CLS]", "i", "like", "[UNK]", "tea", "[SEP]"])
    assert merge_words(tok).labels == ("[CLS]", "I", "like", "🙂", "tea", "[SEP]")


def test_pieces_not_found_in_the_text_fall_back_to_the_markers():
    assert piece_spans("abc", ["xyz"], [False]) is None
    words = merge_words(_tokens("abc", ["[CLS]", "\u2581xy", "z", "\u2581w", "[SEP]"]))
    assert words.labels == ("[CLS]", "xyz", "w", "[SEP]")
    words = merge_words(_tokens("abc", ["[CLS]", "xy", "##z", "w", "[SEP]"]))
    assert words.labels == ("[CLS]", "xyz", "w", "[SEP]")


def test_real_tokenizers_cover_every_character(tiny_bert, tiny_xlmr):
    from mlse.encoders.load import load_encoder
    from mlse.explain.backbones import attributable

    sentences = [
        "A man is playing a flute.",
        "Ein Mann spielt Flöte.",
        "Le chat dort sur le canapé.",
        "狗在院子里跑。",
        "Собака бежит по двору!",
    ]
    for folder in (tiny_bert, tiny_xlmr):
        backbone = attributable(load_encoder(str(folder), cache=False))
        for text in sentences:
            words = merge_words(backbone.tokenize(text))
            content = [w for w, s in zip(words.labels, words.special) if not s]
            assert "".join(content) == text.replace(" ", ""), (folder.name, text, words.labels)
            assert len(words.word_of_token) == len(backbone.tokenize(text).ids)
