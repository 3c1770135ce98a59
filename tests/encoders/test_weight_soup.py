"""Weight soups: the arithmetic against a per-element oracle, and a soup of model folders that loads and encodes."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from mlse.encoders.weight_soup import SOUP_FILE, build_soup, soup_tensors
from mlse.errors import MlseError


def _oracle(base, members, weights, name):
    out = np.empty_like(base[name])
    for idx in np.ndindex(base[name].shape):  # one element at a time, as the formula reads
        b = float(base[name][idx])
        out[idx] = b + sum(w * (float(m[name][idx]) - b) for w, m in zip(weights, members, strict=True))
    return out


def test_soup_is_base_plus_weighted_task_vectors():
    rng = np.random.default_rng(0)
    base = {"w": rng.standard_normal((3, 4)).astype(np.float32), "ids": np.arange(5)}
    members = [{"w": base["w"] + rng.standard_normal((3, 4)).astype(np.float32), "ids": np.arange(5)} for _ in range(2)]
    for weights in ([0.5, 0.5], [1.0, 1.0], [0.7, 0.3], [1.0, 0.0]):
        out = soup_tensors(base, members, weights)
        assert out["w"].dtype == np.float32 and np.allclose(out["w"], _oracle(base, members, weights, "w"), atol=1e-6)
        assert np.array_equal(out["ids"], base["ids"])  # index buffers copied
    assert np.allclose(soup_tensors(base, members, [1.0, 0.0])["w"], members[0]["w"], atol=1e-6)
    assert np.array_equal(soup_tensors(base, members, [0.0, 0.0])["w"], base["w"])


def test_mismatched_models_are_refused():
    base = {"w": np.zeros((2, 2), np.float32), "ids": np.arange(3)}
    with pytest.raises(MlseError, match="one weight per member"):
        soup_tensors(base, [base], [0.5, 0.5])
    with pytest.raises(MlseError, match="no tensor 'w'"):
        soup_tensors(base, [{"ids": np.arange(3)}], [1.0])
    with pytest.raises(MlseError, match="is \\(3, 2\\)"):
        soup_tensors(base, [{"w": np.zeros((3, 2), np.float32), "ids": np.arange(3)}], [1.0])
    with pytest.raises(MlseError, match="not a float tensor"):
        soup_tensors(base, [{"w": base["w"], "ids": np.arange(1, 4)}], [1.0])
    with pytest.raises(MlseError, match="tensors the base has not"):
        soup_tensors(base, [{**base, "extra": np.zeros(1, np.float32)}], [1.0])


def _perturbed_copy(src, dst, seed: float):
    from safetensors.numpy import load_file, save_file

    shutil.copytree(src, dst)
    tensors = load_file(dst / "model.safetensors")
    rng = np.random.default_rng(int(seed))
    moved = {
        k: (v + 0.01 * rng.standard_normal(v.shape)).astype(v.dtype) if v.dtype.kind == "f" else v
        for k, v in tensors.items()
    }
    save_file(moved, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


def test_a_soup_of_model_folders_loads_and_sits_between_its_members(tiny_bert, tmp_path):
    from safetensors.numpy import load_file

    from mlse.encoders.load import load_encoder

    a = _perturbed_copy(tiny_bert, tmp_path / "a", 1)
    b = _perturbed_copy(tiny_bert, tmp_path / "b", 2)
    out = build_soup(tiny_bert, [a, b], [0.5, 0.5], tmp_path / "soup")
    base_t, a_t, b_t, s_t = (load_file(p / "model.safetensors") for p in (tiny_bert, a, b, out))
    for k in base_t:
        assert np.allclose(s_t[k], (a_t[k].astype(np.float64) + b_t[k]) / 2, atol=1e-6), k
    assert (out / SOUP_FILE).is_file() and not any(p.name.startswith(".soup") for p in tmp_path.iterdir())
    texts = ["A man is playing a flute.", "Ein Mann spielt Flöte."]
    emb = {p.name: load_encoder(str(p), cache=False).encode(texts) for p in (a, b, out)}
    assert emb["soup"].shape == emb["a"].shape and not np.allclose(emb["soup"], emb["a"])
    # the soup's cosine of the pair lies near the members' mean (the weights moved little, so nearly linear)
    cos = {k: float(v[0] @ v[1]) for k, v in emb.items()}
    assert abs(cos["soup"] - (cos["a"] + cos["b"]) / 2) < 0.01 + abs(cos["a"] - cos["b"])


def test_a_member_with_other_modules_is_refused(tiny_bert, tmp_path):
    import json

    other = shutil.copytree(tiny_bert, tmp_path / "other")
    modules = json.loads((other / "modules.json").read_text())
    (other / "modules.json").write_text(json.dumps(modules[:-1]))  # one module fewer
    with pytest.raises(MlseError, match="are not the base's"):
        build_soup(tiny_bert, [other], [1.0], tmp_path / "soup")
    assert not (tmp_path / "soup").exists()
