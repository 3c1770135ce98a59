import numpy as np
import pytest

from mlse.encoders.catalogue import available_models, resolve_model
from mlse.encoders.load import load_encoder
from mlse.encoders.protocol import Encoder
from mlse.encoders.torch import SentenceTransformerEncoder
from mlse.errors import ModelNotFoundError

SENTS = ["A man is playing a flute.", "Ein Mann spielt Flöte.", "Кошка спит.", "猫在睡觉。", ""]


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_xlmr", "tiny_labse"])
def test_local_folder_loads_through_registry_and_encodes(request, fixture):
    path = request.getfixturevalue(fixture)
    enc = load_encoder(str(path), cache=False)
    assert isinstance(enc, Encoder)
    emb = enc.encode(SENTS)
    assert emb.dtype == np.float32 and emb.shape[0] == len(SENTS)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    raw = enc.encode(SENTS, normalize=False)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0) or fixture == "tiny_labse"  # LaBSE ends in Normalize


def test_identity_changes_with_weights(tmp_path, tiny_bert):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(tiny_bert, copy)
    a = load_encoder(str(copy), cache=False).identity
    assert a == load_encoder(str(copy), cache=False).identity
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # flip bits in the last weight
    weights.write_bytes(bytes(data))
    assert load_encoder(str(copy), cache=False).identity != a


def test_hub_names_resolve_through_local_hf_cache(fake_hub):
    """labse / xlmr go through the hub code path; offline it is served by the HF cache."""
    for name, dim in [("labse", 24), ("xlmr", 32)]:
        enc = load_encoder(name)
        assert enc.encode(["hello world", "hallo Welt"]).shape == (2, dim)
    status = {m.name: m.status for m in available_models()}
    assert status["labse"].startswith("available") and status["xlmr"].startswith("available")


def test_missing_hub_model_offline_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    offline = "available here: me5-small, muse, minilm-en"
    with pytest.raises(ModelNotFoundError, match=rf"labse.*not in the local HF cache.*{offline}"):
        load_encoder("labse")


def test_unknown_name_lists_available():
    with pytest.raises(ModelNotFoundError, match="available here: .*minilm-en"):
        resolve_model("./no/such/folder")


def test_runs_are_discovered(monkeypatch, tmp_path, tiny_bert):
    import shutil

    runs = tmp_path / "runs"
    shutil.copytree(tiny_bert, runs / "my-student" / "model")
    monkeypatch.setenv("MLSE_RUNS", str(runs))
    spec = resolve_model("runs/my-student")
    assert spec.source == "run"
    assert "runs/my-student" in {m.name for m in available_models()}
    assert load_encoder("my-student", cache=False).encode(["x"]).shape == (1, 32)


def test_minilm_is_the_offline_default():
    enc = load_encoder("minilm-en", cache=False)
    assert isinstance(enc, SentenceTransformerEncoder)
    emb = enc.encode(["A man is playing a flute.", "A man plays the flute.", "The stock market fell."])
    assert emb.shape == (3, 384)
    assert emb[0] @ emb[1] > emb[0] @ emb[2] + 0.3
