"""The tiny test models are the same in every process: their vocabularies are made by rule (tests/tiny_models.py), not
by the ``tokenizers`` trainers, whose ties fell differently in every process."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

from tests.paths import REPO_ROOT as ROOT
from tests.tiny_models import BERT_VOCAB, XLMR_VOCAB, training_sentences, unigram_vocabulary, wordpiece_vocabulary

# sha256 of both vocabularies (JSON), made from the FLORES sentences of the shared data directory
VOCABULARIES_SHA256 = "dd0a24670d41d8951f50c6479fcb01b3c80fbdc8bf57d0d30a211132aa0ce6dc"
DIGEST = (
    "import hashlib, json\n"
    "from mlse.data.paths import resolve_data_dir\n"
    "from tests.tiny_models import training_sentences, unigram_vocabulary, wordpiece_vocabulary\n"
    "s = training_sentences(resolve_data_dir())\n"
    "print(hashlib.sha256(json.dumps([wordpiece_vocabulary(s), unigram_vocabulary(s)], ensure_ascii=False)"
    ".encode()).hexdigest())\n"
)


def digest(sentences: list[str]) -> str:
    both = [wordpiece_vocabulary(sentences), unigram_vocabulary(sentences)]
    return hashlib.sha256(json.dumps(both, ensure_ascii=False).encode()).hexdigest()


def test_the_vocabularies_are_the_pinned_ones_in_every_process(data_dir):
    assert digest(training_sentences(data_dir)) == VOCABULARIES_SHA256
    env = {**os.environ, "PYTHONHASHSEED": "12345", "MLSE_DATA": str(data_dir)}
    other = subprocess.run([sys.executable, "-c", DIGEST], capture_output=True, text=True, cwd=ROOT, env=env)
    assert other.returncode == 0, other.stderr[-2000:]
    assert other.stdout.strip() == VOCABULARIES_SHA256  # another process, another hash seed: the same vocabularies


def test_ties_go_to_the_alphabetically_first_pair():
    # "ab" and "cd" are equally frequent: "ab" is merged first; "##b" only exists as a continuation
    assert wordpiece_vocabulary(["ab cd ab cd"], size=5 + 4 + 1)[5:] == ["##b", "##d", "a", "c", "ab"]
    assert wordpiece_vocabulary(["ab cd ab cd"], size=5 + 4 + 2)[5:] == ["##b", "##d", "a", "c", "ab", "cd"]
    pieces = unigram_vocabulary(["xy xy zw zw"], size=5 + 6)
    assert [p for p, _ in pieces[5:]] == ["w", "x", "y", "z", "\u2581", "\u2581xy"]  # "▁xy" before "▁zw"


def test_the_tiny_tokenizers_use_their_whole_vocabulary(tiny_bert, tiny_xlmr, data_dir):
    from tokenizers import Tokenizer

    sentences = training_sentences(data_dir)
    bert = Tokenizer.from_file(str(tiny_bert / "tokenizer.json"))
    assert bert.get_vocab_size() == BERT_VOCAB
    assert [bert.id_to_token(i) for i in range(BERT_VOCAB)] == wordpiece_vocabulary(sentences)
    assert "[UNK]" not in bert.encode("The cat sits on the mat.").tokens
    xlmr = Tokenizer.from_file(str(tiny_xlmr / "tokenizer.json"))
    assert xlmr.get_vocab_size() == XLMR_VOCAB
    assert "<unk>" not in xlmr.encode("The cat sits on the mat.").tokens
