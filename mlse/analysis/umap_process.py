"""UMAP in a child process: its libraries never enter the caller's memory, and its compiled kernels are kept on disk.

Importing ``umap`` loads numba, llvmlite, pynndescent and scikit-learn, and its first projection compiles umap's
layout kernels: about 340 MB of resident memory that a serving process would then keep for good, and ~20 s of
compiling per process. Here each projection runs in a short-lived ``python -m mlse.analysis.umap_process`` that
reads its points from a ``.npy`` file and writes the coordinates back; the app's memory stays at what it serves.

Compiling is paid once per machine, not once per child: umap's own numba functions are not cached on disk by umap
(pynndescent's are), so the child switches numba's file cache on for them before its first projection
(:func:`cache_umap_kernels`; numba keeps the files next to the package, or in its user cache dir where that is
read-only). Measured on 2 cores (AVX-512 EPYC): a child with the kernels cached starts, projects 800 points and exits
in ~3 s; the in-process projection it replaces took ~10 s on its first call and kept ~340 MB.

The result is the same as an in-process projection with the same arguments: the same function
(:func:`fit_umap_2d`) runs, with a fixed ``random_state``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

COULD_NOT_LAY_OUT = 3  # the child's exit status when UMAP rejects the points (degenerate input), not a crash
_TIMEOUT_S = 900


class UmapFailed(RuntimeError):
    """The child could not run (it crashed, timed out or could not start); the message holds its last lines."""


def fit_umap_2d(X: np.ndarray, *, n_neighbors: int, seed: int) -> np.ndarray:
    """[n, d] unit rows -> [n, 2] float32: UMAP with the cosine metric, ``min_dist`` 0.1, a fixed seed, one thread.

    Raises ValueError / FloatingPointError / LinAlgError on points UMAP cannot lay out (all alike)."""
    import warnings

    import umap

    reducer = umap.UMAP(
        n_components=2,
        metric="cosine",
        n_neighbors=n_neighbors,
        min_dist=0.1,
        random_state=seed,
        n_jobs=1,
        init="spectral" if len(X) > 50 else "random",
    )
    with warnings.catch_warnings():  # n_jobs / random_state notices are expected, not user-facing
        warnings.simplefilter("ignore")
        return np.asarray(reducer.fit_transform(X), dtype=np.float32)


def cache_umap_kernels() -> int:
    """Switch numba's on-disk cache on for umap's jitted functions -> how many were switched on."""
    import umap  # noqa: F401  (loads the submodules whose functions are listed below)
    from numba.core.registry import CPUDispatcher

    switched = 0
    for name, module in list(sys.modules.items()):
        if not name.startswith("umap") or module is None:
            continue
        for value in list(vars(module).values()):
            if isinstance(value, CPUDispatcher) and value.py_func.__module__ == name:
                value.enable_caching()
                switched += 1
    return switched


def umap_2d(X: np.ndarray, *, n_neighbors: int, seed: int, timeout_s: float = _TIMEOUT_S) -> np.ndarray | None:
    """[n, d] -> [n, 2] float32 from a child process, or None when UMAP could not lay these points out.

    Raises :class:`UmapFailed` when the child itself failed."""
    with tempfile.TemporaryDirectory(prefix="mlse-umap-") as tmp:
        points, coords = Path(tmp) / "points.npy", Path(tmp) / "coords.npy"
        np.save(points, np.ascontiguousarray(X, dtype=np.float32))
        cmd = [sys.executable, "-m", __name__, str(points), str(coords), str(n_neighbors), str(seed)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise UmapFailed(f"the UMAP process did not finish: {exc}") from exc
        if done.returncode == COULD_NOT_LAY_OUT:
            return None
        if done.returncode != 0 or not coords.exists():
            tail = "\n".join(done.stderr.strip().splitlines()[-5:])
            raise UmapFailed(f"the UMAP process failed (exit status {done.returncode}): {tail}")
        return np.load(coords)


def _main(argv: list[str]) -> int:
    points, coords, n_neighbors, seed = argv
    X = np.load(points)
    cache_umap_kernels()
    try:
        out = fit_umap_2d(X, n_neighbors=int(n_neighbors), seed=int(seed))
    except (ValueError, FloatingPointError, np.linalg.LinAlgError) as exc:
        print(f"UMAP could not lay out {len(X)} points: {exc}", file=sys.stderr)
        return COULD_NOT_LAY_OUT
    tmp = Path(coords).with_suffix(".part.npy")
    np.save(tmp, out)
    tmp.replace(coords)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
