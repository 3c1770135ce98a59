"""Finding the data directory: the datasets live outside the repository and are never copied into it."""

from __future__ import annotations

import os
from pathlib import Path

from mlse.data.fetch_status import missing_note
from mlse.dirs import package_parent
from mlse.errors import DataError

ENV_VAR = "MLSE_DATA"


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return the data directory as an absolute path.

    Order: ``data_dir``, ``MLSE_DATA``, then ``../shared/data`` from the current directory, then from the repository
    root. A place named explicitly must exist: a silent fallback would make results depend on where one runs."""
    named = (
        (data_dir, "given as data_dir / --data-dir"),
        (os.environ.get(ENV_VAR), f"from the {ENV_VAR} environment variable"),
    )
    for given, origin in named:
        if given is not None and str(given) != "":
            p = Path(given).expanduser()
            if not p.is_dir():
                raise DataError(f"data directory {p} does not exist ({origin})")
            return p.resolve()
    tried = list(
        dict.fromkeys((root / "shared" / "data").resolve() for root in (Path.cwd() / "..", package_parent().parent))
    )
    for candidate in tried:
        if candidate.is_dir():
            return candidate
    places = ", ".join(str(t) for t in tried)
    raise DataError(
        f"no data directory found (tried: no data_dir argument, {ENV_VAR} not set, {places}); "
        f"pass --data-dir or set {ENV_VAR}"
    )


def find_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """:func:`resolve_data_dir`, or None where there is no data directory."""
    try:
        return resolve_data_dir(data_dir)
    except DataError:
        return None


def require_subdir(data_dir: Path, name: str) -> Path:
    """``data_dir / name``, or a DataError that says which dataset folder is missing."""
    sub = data_dir / name
    if not sub.is_dir():
        raise DataError(f"{sub}: dataset folder not found in data directory {data_dir}: {missing_note(name, data_dir)}")
    return sub
