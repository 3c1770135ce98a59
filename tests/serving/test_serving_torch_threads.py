"""On the ONNX backends the app runs torch (the trained heads only) on one thread; on torch it leaves the default."""

from __future__ import annotations

import subprocess
import sys

from tests.paths import REPO_ROOT as ROOT

CHECK = """
import sys, threading
from mlse.serving.torch_threads import limit_torch_threads
started = limit_torch_threads(sys.argv[1])
if started is not None:
    started.join(60)
import torch
seen = []
worker = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))  # a request thread made later
worker.start(); worker.join()
print(started is not None, seen[0], torch.get_num_threads())
"""


def _threads(backend: str) -> list[str]:
    env = {"PATH": "", "OMP_NUM_THREADS": "2"}  # torch's default is then 2 threads on any machine
    out = subprocess.run(
        [sys.executable, "-c", CHECK, backend], capture_output=True, text=True, cwd=ROOT, check=True, env=env
    )
    return out.stdout.split()


def test_onnx_backends_compute_torch_on_one_thread():
    assert _threads("onnx-int8") == ["True", "1", "1"]


def test_the_torch_backend_keeps_torch_default():
    assert _threads("torch") == ["False", "2", "2"]
