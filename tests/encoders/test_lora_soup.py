"""A soup of LoRA adapters as one stacked adapter: the factors' product against the dense weighted sum, and the
stacked adapter merged onto a tiny BERT against the weight soup of the members merged one by one."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlse.encoders.lora_soup import build_lora_soup, lora_scale, stack_lora_tensors
from mlse.errors import MlseError


def _factors(rng, r, n_in=6, n_out=5, key="m.layer.0.q"):
    return {
        f"{key}.lora_A.weight": rng.standard_normal((r, n_in)).astype(np.float32),
        f"{key}.lora_B.weight": rng.standard_normal((n_out, r)).astype(np.float32),
    }


def test_stacked_factors_multiply_to_the_weighted_sum_of_the_members_updates():
    rng = np.random.default_rng(0)
    members = [_factors(rng, 2), _factors(rng, 3), _factors(rng, 1)]
    for coefficients in ([0.5, 0.5, 0.0], [1.0, 2.0, 0.25], [0.7, -0.3, 1.5]):
        out = stack_lora_tensors(members, coefficients)
        a, b = out["m.layer.0.q.lora_A.weight"], out["m.layer.0.q.lora_B.weight"]
        assert a.shape == (6, 6) and b.shape == (5, 6) and a.dtype == np.float32
        dense = sum(
            c * (m["m.layer.0.q.lora_B.weight"].astype(np.float64) @ m["m.layer.0.q.lora_A.weight"])
            for c, m in zip(coefficients, members, strict=True)
        )
        np.testing.assert_allclose(b.astype(np.float64) @ a, dense, atol=1e-5)


def test_scale_follows_peft():
    assert lora_scale({"r": 8, "lora_alpha": 16}) == 2.0
    assert lora_scale({"r": 16, "lora_alpha": 8, "use_rslora": True}) == 2.0
    with pytest.raises(MlseError, match="rank 0"):
        lora_scale({"r": 0, "lora_alpha": 1})


def test_adapters_that_do_not_stack_are_refused():
    rng = np.random.default_rng(1)
    one = _factors(rng, 2)
    with pytest.raises(MlseError, match="one weight per member"):
        stack_lora_tensors([one, one], [1.0])
    with pytest.raises(MlseError, match="other matrices"):
        stack_lora_tensors([one, _factors(rng, 2, key="m.layer.1.q")], [1.0, 1.0])
    with pytest.raises(MlseError, match="another shape"):
        stack_lora_tensors([one, _factors(rng, 2, n_in=7)], [1.0, 1.0])
    with pytest.raises(MlseError, match="only LoRA factors"):
        stack_lora_tensors([{**one, "m.bias": np.zeros(3, np.float32)}], [1.0])


def _random_adapter(base, folder, *, r, alpha, seed):
    import torch
    from sentence_transformers import SentenceTransformer

    from mlse.train.recipes.lora import apply_lora, save_adapter

    student = SentenceTransformer(str(base), device="cpu", local_files_only=True)
    apply_lora(student, r=r, alpha=alpha)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in student.named_parameters():
            if "lora_" in name:
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
    folder.mkdir(parents=True)
    save_adapter(student, folder, extra_from=len(list(student)))
    return folder


def test_the_stacked_adapter_rebuilds_the_weight_soup_of_its_members(tiny_bert, tmp_path):
    from mlse.encoders.load import load_encoder
    from mlse.encoders.lora_merge import build_merged
    from mlse.encoders.weight_soup import build_soup

    one = _random_adapter(tiny_bert, tmp_path / "one", r=2, alpha=4, seed=1)
    two = _random_adapter(tiny_bert, tmp_path / "two", r=4, alpha=2, seed=2)  # another rank and scale
    weights = [0.5, 0.5]
    soup = build_lora_soup([one, two], weights, tmp_path / "soup", names=["one", "two"])
    config = json.loads((soup / "adapter_config.json").read_text())
    assert config["r"] == 6 and config["lora_alpha"] == 6
    assert json.loads((soup / "soup.json").read_text())["members"] == ["one", "two"]

    build_merged(tiny_bert, soup, tmp_path / "from-adapter")
    for name in ("one", "two"):
        build_merged(tiny_bert, tmp_path / name, tmp_path / f"{name}-merged")
    build_soup(tiny_bert, [tmp_path / "one-merged", tmp_path / "two-merged"], weights, tmp_path / "from-weights")

    texts = ["Hello world.", "Hallo Welt.", "A man plays a flute."]
    stacked = load_encoder(str(tmp_path / "from-adapter"), cache=False).encode(texts)
    dense = load_encoder(str(tmp_path / "from-weights"), cache=False).encode(texts)
    members = [load_encoder(str(tmp_path / f"{n}-merged"), cache=False).encode(texts) for n in ("one", "two")]
    np.testing.assert_allclose(stacked, dense, atol=1e-5)
    assert min(np.abs(stacked - m).max() for m in members) > 1e-3  # the soup is neither member


def test_adapters_adapting_other_modules_are_refused(tiny_bert, tmp_path):
    one = _random_adapter(tiny_bert, tmp_path / "one", r=2, alpha=4, seed=1)
    two = _random_adapter(tiny_bert, tmp_path / "two", r=2, alpha=4, seed=2)
    config = json.loads((two / "adapter_config.json").read_text())
    (two / "adapter_config.json").write_text(json.dumps({**config, "target_modules": ["query"]}))
    with pytest.raises(MlseError, match="target_modules"):
        build_lora_soup([one, two], [0.5, 0.5], tmp_path / "soup")
    assert not (tmp_path / "soup").exists()  # nothing half-written
    (two / "adapter_config.json").write_text(json.dumps({**config, "use_dora": True}))
    with pytest.raises(MlseError, match="use_dora"):
        build_lora_soup([one, two], [0.5, 0.5], tmp_path / "soup")
