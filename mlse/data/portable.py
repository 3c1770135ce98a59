"""Paths in records (manifests, result files) that mean the same on every machine.

A record names a file it used as ``data:<relative>`` (under :func:`mlse.data.paths.resolve_data_dir`), ``cache:``
(under :func:`mlse.dirs.cache_root`), ``repo:`` (under the folder holding ``assets/``: the checkout, else the
package) or ``outside:<file name>`` (only the last name is kept). The deepest root wins; parts use ``/``.

Reading (:func:`resolve_record_path`) also accepts older forms: an absolute path (used when it exists here, else
mapped by its tail onto the data directory when it starts with a dataset folder, or onto the cache root after
``.cache/mlse``) and a bare path relative to the data directory (old calibration manifests).

:func:`data_identity`: the first 16 hex digits of the sha256 of the sorted lines ``<path relative to the data
directory>\\t<sha256 of the file>\\n`` (``data:`` dropped). Same identity, same bytes read.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from mlse.data.hashing import file_sha256
from mlse.data.layout import FLORES_DIR, PARALLEL_DIR, STS_DIR, TATOEBA_DIR, WMT_DIR
from mlse.data.paths import find_data_dir
from mlse.dirs import assets_dir, cache_root

DATA, CACHE, REPO, OUTSIDE = "data:", "cache:", "repo:", "outside:"
PREFIXES = (DATA, CACHE, REPO, OUTSIDE)
# dataset folders of the data directory (mlse.data.layout): an old absolute path is mapped onto them by its tail
_DATASET_DIRS = tuple(tuple(d.split("/")) for d in (PARALLEL_DIR, STS_DIR, TATOEBA_DIR, FLORES_DIR, WMT_DIR))
_CACHE_TAIL = (".cache", "mlse")
# first folders of absolute paths that name a place on one machine (homes, mounts, temporary folders); a path under
# another root, such as /proc/cpuinfo or an HTTP route like /gradio_api/run, is left alone in free text
MACHINE_ROOTS = frozenset(
    {
        "home",
        "root",
        "Users",
        "tmp",
        "var",
        "mnt",
        "media",
        "opt",
        "srv",
        "work",
        "workspace",
        "data",
        "scratch",
        "private",
        "content",
        "kaggle",
        "usr",
        "app",
        "nfs",
        "storage",
    }
)
_NAME = r"[\w.+@=~%-]+"
_POSIX = rf"(?<![\w./~\\-])/{_NAME}(?:/{_NAME})+/?"
_WINDOWS = r"(?<![\w])[A-Za-z]:\\(?:[^\\\s\"'<>|:*?]+\\)*[^\\\s\"'<>|:*?]*"
_ABSOLUTE = re.compile(rf"file://(?:localhost)?(?P<uri>/[^\s\"'<>]*)|(?P<win>{_WINDOWS})|(?P<posix>{_POSIX})")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _repo_root() -> Path:
    return assets_dir().parent  # the repository in a checkout, the installed package (holding assets/) otherwise


def _roots(data_dir) -> list[tuple[str, Path]]:
    roots = [(DATA, find_data_dir(data_dir)), (CACHE, cache_root()), (REPO, _repo_root())]
    return [(prefix, Path(os.path.realpath(root))) for prefix, root in roots if root is not None]


def _parts(path: str) -> list[str]:
    return [p for p in re.split(r"[\\/]+", path) if p and not re.fullmatch(r"[A-Za-z]:", p)]


def _tail_form(parts: list[str]) -> str | None:
    """``data:...`` / ``cache:...`` for an old path whose tail starts with a dataset folder or follows .cache/mlse."""
    for n in range(len(parts) - 1, -1, -1):
        for folder in _DATASET_DIRS:
            if tuple(parts[n : n + len(folder)]) == folder:
                return DATA + "/".join(parts[n:])
        if tuple(parts[n : n + 2]) == _CACHE_TAIL:
            return CACHE + ("/".join(parts[n + 2 :]) or ".")
    return None


def portable_path(path: str | os.PathLike[str], data_dir=None, *, legacy: bool = False) -> str:
    """The portable form of ``path`` (a relative path is taken from the current directory); see the module docstring.

    ``legacy=True`` (migrating old records) also maps a path under none of this machine's roots by its tail. A value
    already portable is returned as it is."""
    text = os.fspath(path)
    if text.startswith(PREFIXES):
        return text
    uri = re.match(r"file://(?:localhost)?(/.*)", text)
    if uri:
        text = uri.group(1)
    if re.match(r"[A-Za-z]:\\", text) and os.sep != "\\":  # a Windows path read on another system
        parts = _parts(text)
        return (legacy and _tail_form(parts)) or OUTSIDE + (parts[-1] if parts else "")
    resolved = Path(os.path.realpath(os.path.abspath(text)))
    under = [(prefix, root) for prefix, root in _roots(data_dir) if resolved == root or root in resolved.parents]
    if under:
        prefix, root = max(under, key=lambda found: len(found[1].parts))  # the deepest root; the first of equals
        return prefix + resolved.relative_to(root).as_posix()  # "." for the root itself
    return (legacy and _tail_form(_parts(text))) or OUTSIDE + resolved.name


def is_machine_path(text: str, data_dir=None) -> bool:
    """True for a Windows path, a file:// URI, an absolute POSIX path under a machine root (home, /tmp, /work...)
    or one under this machine's own repository, data or cache folder, wherever those live (a CI checkout in /check)."""
    if text.startswith("file://") or re.match(r"[A-Za-z]:\\", text):
        return True
    parts = PurePosixPath(text).parts
    if not text.startswith("/") or len(parts) <= 2:
        return False
    if parts[1] in MACHINE_ROOTS:
        return True
    resolved = Path(os.path.realpath(text))
    return any(resolved == root or root in resolved.parents for _, root in _roots(data_dir))


def find_absolute_paths(text: str, data_dir=None) -> list[str]:
    """Every machine-specific absolute path in ``text`` (see :func:`is_machine_path`), in order."""
    return [m.group(0) for m in _ABSOLUTE.finditer(text) if is_machine_path(m.group(0), data_dir)]


def portable_text(text: str, data_dir=None, *, legacy: bool = False) -> str:
    """``text`` with every machine-specific absolute path in it replaced by its portable form."""

    def swap(match: re.Match) -> str:
        found = match.group(0)
        if not is_machine_path(found, data_dir):
            return found
        core = found.rstrip("/")
        stop = "." if core.endswith(".") and not core.endswith("..") else ""  # a sentence's full stop, not the path's
        return portable_path(core.removesuffix(stop), data_dir, legacy=legacy) + stop

    return _ABSOLUTE.sub(swap, text)


def portable_record(obj: Any, data_dir=None, *, legacy: bool = False) -> Any:
    """A copy of a JSON-like record with :func:`portable_text` applied to every string, dictionary keys included.
    Keys that become equal keep both values: the later gets ``#2``, ``#3``... (never a silent loss)."""
    if isinstance(obj, str):
        return portable_text(obj, data_dir, legacy=legacy)
    if isinstance(obj, Mapping):
        out: dict = {}
        for key, value in obj.items():
            new_key = portable_text(key, data_dir, legacy=legacy) if isinstance(key, str) else key
            value = portable_record(value, data_dir, legacy=legacy)
            if new_key in out and out[new_key] != value:
                new_key = next(f"{new_key}#{n}" for n in itertools.count(2) if f"{new_key}#{n}" not in out)
            out[new_key] = value
        return out
    if isinstance(obj, (list, tuple)):
        return [portable_record(v, data_dir, legacy=legacy) for v in obj]
    return obj


def data_hashes(paths: Iterable[str | os.PathLike[str]], data_dir=None) -> dict[str, str]:
    """``{portable path: sha256}`` of files, in the order given: the ``data`` map of a record (results, calibrations,
    training runs)."""
    return {portable_path(p, data_dir): file_sha256(p) for p in paths}


def portable_hashes(hashes: Mapping[Any, str], data_dir=None) -> dict[str, str]:
    """``{file: sha256}`` with each file (a path or a string read from a record) in its portable form."""
    return {_portable_key(path, data_dir): digest for path, digest in hashes.items()}


def _portable_key(path, data_dir) -> str:
    text = os.fspath(path)
    if text.startswith(PREFIXES) or isinstance(path, str) and not _is_absolute(text):
        return text  # already portable, or an older record's path relative to the data directory
    return portable_path(path, data_dir)


def is_hash_map(value: Any) -> bool:
    """True for a non-empty ``{file: sha256 hex}`` mapping (a record's ``data``)."""
    return (
        isinstance(value, Mapping)
        and bool(value)
        and all(isinstance(v, str) and _SHA256.match(v) for v in value.values())
    )


def data_identity(hashes: Mapping[str, str]) -> str:
    """16 hex digits naming the files a record used by content and place in the data directory (module docstring)."""
    lines = sorted(f"{os.fspath(k).removeprefix(DATA)}\t{v}\n" for k, v in hashes.items())
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()[:16]


def resolve_record_path(value: str, data_dir=None) -> Path | None:
    """Where a path read from a record (new form or old absolute path) is on this machine; None when it cannot be
    known (``outside:``, ``data:`` without a data directory, an old path that matches nothing here)."""
    if value.startswith(DATA) or not value.startswith(PREFIXES) and not _is_absolute(value):
        root = find_data_dir(data_dir)
        return root / value.removeprefix(DATA) if root is not None else None
    if value.startswith(CACHE):
        return cache_root() / value.removeprefix(CACHE)
    if value.startswith(REPO):
        return _repo_root() / value.removeprefix(REPO)
    if value.startswith(OUTSIDE):
        return None
    path = Path(re.sub(r"^file://(?:localhost)?", "", value))
    if path.exists():
        return path
    tail = _tail_form(_parts(value))
    return resolve_record_path(tail, data_dir) if tail else None


def _is_absolute(value: str) -> bool:
    return value.startswith(("/", "file://")) or bool(re.match(r"[A-Za-z]:\\", value))
