"""The repository speaks for itself: no code, test or doc points at a tracker's issue numbers or at files outside
the repository, every real-world case number used anywhere is described in `docs/cases.md`, and every test that
page names exists."""
import re
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)
SKIP_DIRS = {".git", ".venv", "node_modules", "var", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis",
             ".import_linter_cache", "build", "out"}
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".ini", ".sh", ".json", ".ts", ".tsx", ".j2"}
NAMES = {"Makefile", "run", ".importlinter", "Dockerfile"}
OUTSIDE = re.compile("|".join([
    r"\b[Ii]ssues? #?\d+",                                   # a tracker's issue numbers
    r"\.\./" + "shared/", r"\bshared/(fixtures|design|traces)\b",  # the workplace's folders beside the checkout
    r"\b(DOMAIN|ARCHITECTURE|COMPONENTS)\.md\b", r"real-world-cases\.md",
]))
CASE = re.compile(r"\bRW-(\d{3})")


def _files():
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts) or not path.is_file():
            continue
        if path.suffix in SUFFIXES or path.name in NAMES:
            yield rel, path.read_text(errors="replace")


def test_nothing_points_at_tracker_issues_or_files_outside_the_repository():
    me = Path(__file__).relative_to(ROOT)
    found = [f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
             for rel, text in _files() if rel != me for m in OUTSIDE.finditer(text)]
    assert found == []


def test_every_case_number_used_is_described_in_docs_cases():
    described = set(re.findall(r"^\| RW-(\d{3}) \|", (ROOT / "docs" / "cases.md").read_text(), flags=re.M))
    used = {(n, str(rel)) for rel, text in _files() for n in CASE.findall(text) if rel != Path("docs/cases.md")}
    missing = sorted(f"RW-{n} ({where})" for n, where in used if n not in described)
    assert missing == []


def test_every_test_named_in_docs_cases_exists():
    missing = []
    for line in (ROOT / "docs" / "cases.md").read_text().splitlines():
        current = None
        for span in re.findall(r"`([^`]+)`", line):
            file, _, name = span.partition("::")
            if file.startswith("tests/"):
                current = ROOT / file
                if not current.exists():
                    missing.append(file)
                    continue
            elif not (file == "" and name and current is not None):
                continue
            if name and f"def {name}(" not in current.read_text():
                missing.append(f"{current.relative_to(ROOT)}::{name}")
    assert missing == []
