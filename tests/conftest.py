"""Session fixtures: real data directory, tiny local models, an isolated embedding cache and HF cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest_data import data_dir  # noqa: F401  (re-exported fixture)
from tests.map_helpers import fake_scorer  # noqa: F401  (re-exported fixture)
from tests.no_silent_skips import fail_skip_under_ci
from tests.tiny_models import build_tiny_bert, build_tiny_xlmr, install_in_hf_cache

MINILM = "minilm-en"


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the group into the test's id
def pytest_collection_modifyitems(items):
    """The suite runs on several xdist workers (pyproject's addopts, ``--dist loadgroup``). A module's tests stay on
    one worker, so a module-scoped fixture (a real model's scores, a started app) is built once; the Ray tests
    (tests/scale/) all stay on one, one after another, so that no two local Ray clusters start at once."""
    for item in items:
        group = "ray" if item.path.parent.name == "scale" else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI (``CI`` set) a skip fails the test: see tests/no_silent_skips.py."""
    outcome = yield
    fail_skip_under_ci(outcome.get_result())


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path_factory, monkeypatch):
    """Every test gets a private embedding cache and runs dir, and no hub access."""
    monkeypatch.setenv("MLSE_CACHE", str(tmp_path_factory.mktemp("mlse-cache")))
    monkeypatch.setenv("MLSE_RUNS", str(tmp_path_factory.mktemp("runs")))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("MLSE_DEVICE", "cpu")


@pytest.fixture(autouse=True)
def _no_served_upload_folder():
    """A test that builds the served app (build_server) installs its upload folder for the process; later tests call
    the handlers in-process, with the paths they made."""
    yield
    from mlse.serving.upload_folder import install

    install(None)


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Tiny models gain nothing from intra-op threads, and on a busy 2-core machine OpenMP spinning makes them about
    10x slower; tests marked ``multithread`` (the real MiniLM) get every core back."""
    import torch

    torch.set_num_threads(1)
    yield


@pytest.fixture(autouse=True)
def _all_threads_when_marked(request):
    if request.node.get_closest_marker("multithread") is None:
        yield
        return
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    yield
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def models_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tiny-models")


@pytest.fixture(scope="session")
def tiny_bert(models_root, data_dir) -> Path:  # noqa: F811
    return build_tiny_bert(data_dir, models_root / "tiny-bert")


@pytest.fixture(scope="session")
def tiny_xlmr(models_root, data_dir) -> Path:  # noqa: F811
    return build_tiny_xlmr(data_dir, models_root / "tiny-xlmr")


@pytest.fixture(scope="session")
def tiny_labse(models_root, data_dir) -> Path:  # noqa: F811
    return build_tiny_bert(data_dir, models_root / "tiny-labse", labse_like=True)


@pytest.fixture()
def fake_hub(tmp_path, monkeypatch, tiny_labse, tiny_xlmr) -> Path:
    """A local HF cache holding tiny stand-ins for LaBSE and XLM-R under their real hub ids."""
    cache = tmp_path / "hf-cache"
    install_in_hf_cache(tiny_labse, cache, "sentence-transformers/LaBSE")
    install_in_hf_cache(tiny_xlmr, cache, "sentence-transformers/paraphrase-xlm-r-multilingual-v1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache
