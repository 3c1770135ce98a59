"""``python -m mlse records migrate [--check] [PATH ...]``: make old records portable (:mod:`mlse.data.portable`).

Rewrites every file naming an absolute path (:mod:`mlse.data.portable_migration`); a second run changes nothing.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from mlse.dirs import package_parent

DEFAULT_PATHS = ("assets", "results")


def add_records_parser(sub) -> None:
    """Register ``records`` on the subcommand parsers of :func:`mlse.cli.main.build_parser`."""
    rec = sub.add_parser(
        "records",
        help="rewrite manifests and result files to name data files portably",
        description="Replace the absolute paths that old manifests, result files and reports hold by "
        "paths relative to the data directory (data:...), the cache (cache:...) or the "
        "repository (repo:...); anything else keeps only its file name (outside:...). "
        "Idempotent; shipped manifests get the new hashes of the files they "
        "list.",
    )
    actions = rec.add_subparsers(dest="action", required=True)
    mig = actions.add_parser("migrate", help="rewrite absolute paths into portable ones (idempotent)")
    mig.add_argument("paths", nargs="*", help="files or folders (default: the repository's assets/ and results/)")
    mig.add_argument(
        "--check",
        action="store_true",
        help="write nothing; list the files that still hold an absolute path (exit 1 if any)",
    )
    mig.add_argument("--data-dir", default=None, help="datasets folder (else $MLSE_DATA, else ../shared/data)")


def cmd_records(args: argparse.Namespace) -> int:
    from mlse.data.portable_migration import files_with_absolute_paths, migrate_records, write_migration

    repo = package_parent()
    paths = [Path(p) for p in args.paths] or [repo / p for p in DEFAULT_PATHS if (repo / p).exists()]
    if args.check:
        found = files_with_absolute_paths(paths)
        for path, hits in found.items():
            more = f" (+{len(hits) - 1} more)" if len(hits) > 1 else ""
            print(f"absolute path in {_shown(path)}: {hits[0]}{more}")
        print(f"{len(found)} file(s) hold absolute paths" if found else "no absolute paths found")
        return 1 if found else 0
    result = migrate_records(paths, data_dir=args.data_dir)
    write_migration(result)
    for path in sorted(result.changed, key=str):
        renewed = result.manifests_updated.get(path)
        note = f" (new hash of {', '.join(renewed)})" if renewed else ""
        print(f"rewrote {_shown(path)}{note}")
    print(f"{len(result.changed)} of {result.read} text file(s) rewritten")
    return 0


def _shown(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
