"""The versions the package, its docs and its changelog name agree.

No ``versionadded``/``versionchanged`` in the package or the docs names a version newer than
``__version__`` (a note about a release that does not exist yet), and the changelog has a
section for ``__version__`` under an ``[Unreleased]`` one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pynamodb_sharding

ROOT = Path(__file__).resolve().parents[2]
DIRECTIVE = re.compile(r"(?:\.\. version(?:added|changed):: |New in )(\d+)\.(\d+)\.(\d+)")


def release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def newer_notes(paths: list[Path], version: tuple[int, ...], root: Path = ROOT) -> list[str]:
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for match in DIRECTIVE.finditer(line):
                if tuple(int(part) for part in match.groups()) > version:
                    found.append(f"{path.relative_to(root)}:{number}: {match.group(0)}")
    return found


def test_no_version_note_is_newer_than_the_package() -> None:
    paths = sorted((ROOT / "pynamodb_sharding").rglob("*.py")) + sorted((ROOT / "docs").glob("*.rst"))
    assert len(paths) > 40
    assert [] == newer_notes(paths, release(pynamodb_sharding.__version__))


def test_a_newer_note_is_reported(tmp_path: Path) -> None:
    """The check can fail: a note naming the next release is found, one naming this one is not."""
    note = tmp_path / "note.rst"
    note.write_text(".. versionadded:: 0.1.0\n\n.. versionchanged:: 0.2.0\n", encoding="utf-8")
    assert ["note.rst:3: .. versionchanged:: 0.2.0"] == newer_notes([note], (0, 1, 0), root=tmp_path)


def test_the_changelog_has_a_section_for_the_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\]", changelog, flags=re.MULTILINE)
    assert headings[:2] == ["Unreleased", pynamodb_sharding.__version__]
