"""docs/architecture.md matches the tree: every repository path it names exists, and every
folder of Python modules in either package has its row.

A path is a code span with no space in it that has a `/` or a file extension (`serving.py`,
`engine/`, `schemas/README.md`); spans like `/health` (a URL path), `MessagesService` or
`nox -s schemas` are not paths. In a table row, a path in the second column may be relative to
a folder of the first column (the page's convention: `` `reference_server/engine/` `` then
`` `base.py` ``) or to the repository root; anywhere else, to the root. Cheap: no docs build.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "architecture.md"
PACKAGES = ("conformance", "reference_server")

_SPAN = re.compile(r"`([^`]+)`")
_FILE = re.compile(r"\.[A-Za-z0-9]+$")


def _paths(text: str) -> list[str]:
    return [
        span
        for span in _SPAN.findall(text)
        if not re.search(r"[\s<>*…]", span)
        and not span.startswith(("/", "-"))
        and ("/" in span or _FILE.search(span))
    ]


def _row(line: str) -> list[str]:
    """The cells of a table row (none for other lines and the header's rule)."""
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []
    return cells if len(cells) >= 2 and not set(cells[0]) <= set("-: ") else []


def named(page: str) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Each path the page names, with the folders it may be relative to ("" is the root)."""
    for line in page.splitlines():
        if cells := _row(line):
            folders = tuple(path for path in _paths(cells[0]) if path.endswith("/"))
            for path in _paths(cells[0]):
                yield path, ("",)
            for cell in cells[1:]:
                for path in _paths(cell):
                    yield path, (*folders, "")
        else:
            for path in _paths(line):
                yield path, ("",)


def missing(page: str, root: Path = REPO) -> list[str]:
    """The paths of `page` found in none of their folders, as the page's first folder reads them."""
    return [
        f"{folders[0]}{path}"
        for path, folders in named(page)
        if not any((root / folder / path).exists() for folder in folders)
        or (path.endswith("/") and not any((root / folder / path).is_dir() for folder in folders))
    ]


def test_the_reader_finds_paths_and_resolves_them_by_row():
    row = "| `conformance/` | `cli.py` (`plumbline`), `judging.py`, `wire/target.py`, `/health`, `nox -s docs` |"
    assert list(named(row)) == [
        ("conformance/", ("",)),
        ("cli.py", ("conformance/", "")),
        ("judging.py", ("conformance/", "")),
        ("wire/target.py", ("conformance/", "")),
    ]
    assert missing(row) == ["conformance/judging.py"]  # judging is a folder of modules now
    assert missing("see `reference_server/serving.py` and `docs/`") == []
    assert missing("see `reference_server/serving.py/`") == ["reference_server/serving.py/"]


def test_every_path_the_page_names_exists():
    page = PAGE.read_text()
    assert len(list(named(page))) > 150  # the reader reads the page
    assert missing(page) == []


def test_every_folder_of_modules_has_its_row():
    page = PAGE.read_text()
    rows = {path for line in page.splitlines() if (cells := _row(line)) for path in _paths(cells[0])}
    folders = {
        f"{init.parent.relative_to(REPO).as_posix()}/"
        for package in PACKAGES
        for init in (REPO / package).rglob("*.py")
        if "__pycache__" not in init.parts
    }
    assert folders - rows == set()
