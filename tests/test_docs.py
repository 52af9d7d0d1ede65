"""The documentation site (mkdocs.yml, docs/): it builds with `--strict`, its generated pages
hold the whole catalogue, the levels and the coverage, and a real browser (headless Chromium)
shows every property id on the catalogue page."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conformance.catalogue import REGISTRY
from conformance.properties import load_all

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


class Ids(HTMLParser):
    """Every element id of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids.update(value for name, value in attrs if name == "id" and value)


def ids_of(html: str) -> set[str]:
    parser = Ids()
    parser.feed(html)
    return parser.ids


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    return out


def test_the_catalogue_page_lists_every_property(site: Path):
    load_all()
    shown = ids_of((site / "catalogue" / "index.html").read_text())
    assert set(REGISTRY) <= shown


def test_the_generated_pages_replace_their_markers(site: Path):
    from conformance.reporting.levels import levels_markdown

    for page in ("catalogue", "levels", "coverage", "properties"):
        html = (site / page / "index.html").read_text()
        assert "<!-- generated:" not in html, page
        assert "<!-- count:" not in html, page
    musts = levels_markdown().split(";")[0]  # "193 properties: 155 MUST, 38 SHOULD, 0 MAY"
    assert musts in (site / "levels" / "index.html").read_text()
    assert "all keys" in (site / "coverage" / "index.html").read_text()


def test_a_browser_shows_every_property_id(site: Path, tmp_path: Path):
    """What a reader's browser builds from the page (Material's scripts run), not its source."""
    browser = next((found for name in BROWSERS if (found := shutil.which(name))), None)
    if browser is None:
        if os.environ.get("PLUMBLINE_REQUIRE_BROWSER"):  # nox -s docs: the check is the point
            pytest.fail("no Chromium on PATH (Debian: apt-get install chromium)")
        pytest.skip("no Chromium on PATH (Debian: apt-get install chromium); nox -s docs needs one")
    page = (site / "catalogue" / "index.html").as_uri()
    shown = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path}",
         "--virtual-time-budget=5000", "--dump-dom", page],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    load_all()
    dom = ids_of(shown.stdout)
    assert set(REGISTRY) <= dom, sorted(set(REGISTRY) - dom)[:10]
    assert "md-sidebar" in shown.stdout  # the theme's layout, built by the browser
