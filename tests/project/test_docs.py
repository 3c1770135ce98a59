"""The documentation: the MkDocs site builds strictly, the README stays short and its links resolve, every command a
newcomer is told to type is run by a test (or marked long with its time), the teaching guide quotes measured numbers,
and no page speaks of internal work items by number."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT as ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
GETTING_STARTED = DOCS / "getting-started.md"
TEACHING = DOCS / "teaching.md"
TEACHING_NUMBERS = ROOT / "results" / "teaching" / "teaching-numbers.md"
MAX_README_LINES = 250

# command (as written in a bash block, its comment removed) -> (file that runs it, text that file must contain).
# Only commands really exercised there: CI's script, a test that starts the same process, or a test below.
RUN_ELSEWHERE = {
    "pip install -r requirements.txt -c constraints.txt": (".ci/run", "-r requirements.txt -c constraints.txt"),
    "python -m pytest -q": (".ci/run", "python -m pytest -q"),
    "python app.py": ("tests/project/test_spaces_ready.py", '[sys.executable, "app.py"]'),
    "python -m mlse models": ("tests/project/test_docs.py", "def test_getting_started_lists_the_models"),
    "python -m mlse data info": ("tests/project/test_docs.py", "def test_getting_started_shows_the_data"),
    "python -m mlse score assets/examples/pairs_to_score.tsv --models minilm-en --out scored.csv": (
        "tests/project/test_docs.py",
        "def test_getting_started_scores_a_file",
    ),
}
LONG = re.compile(r"#\s*long:\s*~?\s*\d+(\.\d+)?\s*(s|sec|min|minutes|h|hours?)\b")
# "issue 15", "Issue #4", "issues 3": an internal work item by number. Links to other projects' trackers are URLs,
# removed before matching.
WORK_ITEM = re.compile(r"\bissues?\s*#?\s*\d+", re.IGNORECASE)
URL = re.compile(r"https?://\S+")
TEXT_SUFFIXES = {".md", ".txt", ".json", ".jsonl", ".tsv", ".csv", ".html", ".py", ".js", ".svg", ".yml", ".yaml"}


def _python(*args: str, timeout: float = 120, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


# -- the site ---------------------------------------------------------------------------------------------------------
# not --quiet: it hides the warnings that --strict turns into a failure (a broken anchor then builds with exit code 0)
STRICT_BUILD = ("-m", "mkdocs", "build", "--strict")


def test_mkdocs_builds_strictly(tmp_path):
    """Broken links, unknown anchors, pages missing from the nav and API entries that cannot be found all fail."""
    from tests.ci import require_module

    require_module("mkdocs")  # and mkdocs-material, mkdocstrings: requirements.txt
    done = _python(*STRICT_BUILD, "-d", str(tmp_path / "site"), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "teaching" / "index.html").is_file()
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "similarity" in api and "Both sides are encoded in one call" in api  # written from the docstring


def test_the_strict_build_fails_on_a_broken_anchor(tmp_path):
    """The flags above do fail a site whose link names an anchor its page lacks (and pass it once the anchor exists)."""
    from tests.ci import require_module

    require_module("mkdocs")
    (tmp_path / "docs").mkdir()
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: t\nnav: [a.md, b.md]\nvalidation: {anchors: warn}\n", encoding="utf-8"
    )
    (tmp_path / "docs" / "b.md").write_text("# B\n\n## The real heading\n", encoding="utf-8")

    def build(anchor: str) -> subprocess.CompletedProcess:
        (tmp_path / "docs" / "a.md").write_text(f"# A\n\n[see](b.md#{anchor})\n", encoding="utf-8")
        return _python(*STRICT_BUILD, "-d", str(tmp_path / "site"), cwd=tmp_path)

    broken = build("no-such-heading")
    assert broken.returncode != 0 and "no-such-heading" in broken.stdout + broken.stderr
    assert build("the-real-heading").returncode == 0


def test_the_plots_are_svg_drawn_from_the_results(tmp_path):
    sys.path.insert(0, str(ROOT))
    from docs.plots import FIGURES, write_all

    paths = write_all(tmp_path)
    assert [p.name for p in paths] == list(FIGURES)
    for path in paths:
        svg = ET.parse(path).getroot()
        assert svg.tag.endswith("svg") and len(svg.findall(".//{http://www.w3.org/2000/svg}polyline")) >= 3
        assert (DOCS / "figures" / path.name).read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), (
            f"docs/figures/{path.name} is stale: run python docs/make_figures.py --only plots"
        )


# -- the README -------------------------------------------------------------------------------------------------------
def test_readme_is_a_few_screens():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_readme_links_and_pictures_resolve():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [t.split("#", 1)[0] for t in targets if not URL.match(t) and not t.startswith("#")]
    assert local, "the README links into docs/"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


# -- commands ---------------------------------------------------------------------------------------------------------
def bash_commands(path: Path) -> list[tuple[str, str]]:
    """(command, its comment) for every command in the file's ```bash blocks; `a && b` gives two commands."""
    out, inside, pending = [], False, ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip().startswith("```"):
            inside = line.strip() == "```bash" if not inside else False
            continue
        if not inside:
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line, pending = pending + line, ""
        code, _, comment = line.partition(" #")
        if not code.strip() or code.strip().startswith("#"):
            continue
        out += [(" ".join(part.split()), comment) for part in code.split("&&")]
    return out


@pytest.mark.parametrize("path", [README, GETTING_STARTED], ids=lambda p: p.name)
def test_every_command_is_run_by_a_test_or_marked_long(path):
    commands = bash_commands(path)
    assert commands, f"{path.name} has no bash block"
    for command, comment in commands:
        if LONG.search("#" + comment):
            continue
        assert command in RUN_ELSEWHERE, (
            f"{path.name}: `{command}` is neither run by a test (tests/project/test_docs.py RUN_ELSEWHERE) nor marked "
            "`# long: <time>`"
        )
        runner, evidence = RUN_ELSEWHERE[command]
        assert evidence in (ROOT / runner).read_text(encoding="utf-8"), f"{runner} no longer runs `{command}`"


def test_getting_started_lists_the_models():
    done = _python("-m", "mlse", "models")
    assert done.returncode == 0, done.stderr
    for name in ("me5-small", "muse", "minilm-en"):
        assert name in done.stdout


def test_getting_started_shows_the_data():
    done = _python("-m", "mlse", "data", "info")
    assert done.returncode == 0, done.stderr  # the data directory is required, as for every data test (conftest_data)
    assert "data directory:" in done.stdout and "STS Multi MT" in done.stdout


@pytest.mark.slow
def test_getting_started_scores_a_file(tmp_path):
    """The getting-started command, writing into a temporary folder instead of ./scored.csv."""
    out = tmp_path / "scored.csv"
    done = _python(
        "-m",
        "mlse",
        "score",
        "assets/examples/pairs_to_score.tsv",
        "--models",
        "minilm-en",
        "--out",
        str(out),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    header = out.read_text(encoding="utf-8").splitlines()[0]
    assert "minilm-en cosine" in header


# -- the teaching guide ---------------------------------------------------------------------------------------------
def observation_blocks(text: str) -> list[str]:
    """The bodies of the guide's `!!! success "What you should see"` admonitions (4-space indented)."""
    blocks = re.findall(r'^!!! success "What you should see[^"]*"\n((?:    .*\n|\n)+)', text, flags=re.MULTILINE)
    return [b for b in blocks if b.strip()]


def test_the_teaching_guide_quotes_measured_numbers():
    guide = TEACHING.read_text(encoding="utf-8")
    measured = TEACHING_NUMBERS.read_text(encoding="utf-8")
    assert "python -m benchmarks.teaching_numbers" in guide
    blocks = observation_blocks(guide)
    assert len(blocks) == 5, "one 'What you should see' block per exercise"
    for block in blocks:
        numbers = re.findall(r"(?<![\w.])\d+\.\d+(?![\w.])", block)
        assert numbers, f"an observation without a measured number:\n{block}"
        for number in numbers:
            assert number in measured, f"{number} is quoted in docs/teaching.md but not in {TEACHING_NUMBERS.name}"


# -- wording --------------------------------------------------------------------------------------------------------
def text_files() -> list[Path]:
    files = [README, *DOCS.rglob("*"), *(ROOT / "assets").rglob("*"), *(ROOT / "results").rglob("*")]
    return [p for p in files if p.is_file() and p.suffix in TEXT_SUFFIXES]


def test_no_internal_work_item_numbers():
    found = []
    for path in text_files():
        text = URL.sub("", path.read_text(encoding="utf-8", errors="replace"))
        for match in WORK_ITEM.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{path.relative_to(ROOT)}:{line}: {match.group(0)!r}")
    assert not found, "say what the thing is, not its work-item number:\n" + "\n".join(found[:40])


def test_placeholders_only_where_the_lead_fills_them_in():
    for path in [README, *DOCS.rglob("*.md")]:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\b(TODO|TBD|FIXME|DRAFT)\b", text), path.name
        if "Placeholder" in text:
            assert path.name in {"speed.md", "deploy.md"}, f"{path.relative_to(ROOT)} has a placeholder"
