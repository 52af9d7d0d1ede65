"""`plumbline matrix` on recorded runs (tests/conformance/data/runs/README.md says how they
were made): a cell per (property, run), evidence links, the union of property sets."""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.reporting.matrix import (
    Run,
    build_matrix,
    load_run,
    render_html,
    render_markdown,
    resolve_run_dir,
)

RUNS = Path(__file__).parent / "data" / "runs"
CLEAN = RUNS / "tiny-random" / "20261201T113700Z-1b77"  # msg_00, stream_00: all PASS
FAULTED = RUNS / "tiny-random" / "20261201T114322Z-f7f8"  # + MSG-021, TOKENS-007; 5 faults
SMOLLM2 = RUNS / "smollm2" / "20261201T113752Z-6109"  # + MSG-021, TOKENS-00*; all PASS


class Cells(HTMLParser):
    """Collects each verdict cell: (property, run) → (classes, href, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[tuple[str, int], dict[str, str | None]] = {}
        self.rows: list[tuple[str, str]] = []  # (row class, area) in document order
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self._cell: dict[str, str | None] | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "tr" and attributes.get("class") in ("area", "prop"):
            self.rows.append((attributes["class"] or "", attributes.get("data-area") or ""))
        if tag == "td" and "data-property" in attributes:
            self._cell = {"class": attributes["class"], "href": None, "text": ""}
            self.cells[(attributes["data-property"] or "", int(attributes["data-run"] or 0))] = self._cell
        if tag == "a" and self._cell is not None:
            self._cell["href"] = attributes["href"]

    def handle_data(self, data):
        if self._cell is not None:
            self._cell["text"] = (self._cell["text"] or "") + data

    def handle_endtag(self, tag):
        if tag == "td":
            self._cell = None


def parse(page: str) -> Cells:
    parser = Cells()
    parser.feed(page)
    return parser


def verdicts(run_dir: Path) -> dict[str, str]:
    index = json.loads((run_dir / "index.json").read_text())
    return {p["id"]: p["verdict"] for p in index["properties"]}


def test_a_target_directory_means_its_newest_run():
    assert resolve_run_dir(RUNS / "tiny-random") == FAULTED
    assert resolve_run_dir(CLEAN / "index.json") == CLEAN
    assert load_run(RUNS / "smollm2").run_id == "20261201T113752Z-6109"


def test_the_page_has_a_cell_per_property_and_run(tmp_path):
    out = tmp_path / "page"
    assert main(["matrix", str(CLEAN), str(SMOLLM2), str(RUNS / "tiny-random"), "--out", str(out)]) == 0
    page = (out / "matrix.html").read_text()
    cells = parse(page).cells
    runs = [verdicts(CLEAN), verdicts(SMOLLM2), verdicts(FAULTED)]
    union = set().union(*runs)
    assert len(union) == 26
    assert set(cells) == {(pid, n) for pid in union for n in (1, 2, 3)}
    for (pid, n), cell in cells.items():
        expected = runs[n - 1].get(pid)
        if expected is None:
            assert cell["class"] == "v absent", (pid, n)
            assert cell["text"] == "—"
        else:
            assert cell["class"] == f"v {expected}", (pid, n)
            assert cell["text"] == expected
    # The faults broke exactly these in the third run; the others are the clean verdicts.
    broken = {pid: v for pid, v in runs[2].items() if v not in ("PASS", "SKIP")}
    assert broken == {
        "MSG-003": "FAIL",
        "MSG-004": "FAIL",
        "STREAM-002": "FAIL",
        "STREAM-003": "FAIL",
        "TOKENS-007": "WARN",
    }
    assert cells[("MSG-021", 1)]["class"] == "v absent"
    assert cells[("MSG-021", 2)]["class"] == "v PASS"
    assert cells[("MSG-021", 3)]["class"] == "v SKIP"
    assert cells[("TOKENS-001", 3)]["class"] == "v absent"


def test_each_broken_cell_links_to_its_evidence_relative_to_the_page(tmp_path):
    out = tmp_path / "deep" / "page"
    assert main(["matrix", str(CLEAN), str(FAULTED), "--out", str(out)]) == 0
    cells = parse((out / "matrix.html").read_text()).cells
    href = cells[("MSG-004", 2)]["href"]
    assert href is not None
    assert href.endswith("tiny-random/20261201T114322Z-f7f8/cases/MSG-004.json")
    assert (out / href).resolve() == (FAULTED / "cases" / "MSG-004.json").resolve()
    assert json.loads((out / href).read_text())["id"] == "MSG-004"
    assert cells[("TOKENS-007", 2)]["href"] == href.replace("MSG-004", "TOKENS-007")
    # Passing properties carry no evidence, so nothing to link.
    assert cells[("MSG-004", 1)]["href"] is None
    assert cells[("MSG-001", 2)]["href"] is None


def test_the_page_states_runs_scores_and_the_shared_set(tmp_path):
    assert main(["matrix", str(CLEAN), str(SMOLLM2), str(FAULTED), "--out", str(tmp_path)]) == 0
    page = (tmp_path / "matrix.html").read_text()
    assert "18 of 26 properties are shared by all 3 runs" in page
    for header in (
        "tiny-random",
        "smollm2",
        "http://127.0.0.1:8124",
        "smollm2-135m-instruct",
        "suite 0.1.0",
        "20261201T114322Z-f7f8",
        "2026-12-01 11:43 UTC",
        "MUST 13/18 pass · SHOULD 1/2 pass",
        "MUST 23/23 pass · SHOULD 3/3 pass",
    ):
        assert header in page, header
    # Self-contained: no external script, stylesheet or image.
    tags = parse(page).tags
    assert not [t for t, a in tags if t in ("script", "img", "link") and (a.get("src") or a.get("href"))]
    assert {a.get("data-filter") for t, a in tags if t == "select"} == {"area", "level", "verdict"}


def test_rows_are_grouped_by_area_in_catalogue_order(tmp_path):
    matrix = build_matrix([load_run(SMOLLM2), load_run(FAULTED)], tmp_path)
    rows = parse(render_html(matrix)).rows
    assert [area for kind, area in rows if kind == "area"] == ["MSG", "STREAM", "TOKENS"]
    current = ""
    for kind, area in rows:
        if kind == "area":
            current = area
        else:
            assert area == current


def test_the_markdown_table(tmp_path):
    assert main(["matrix", str(CLEAN), str(SMOLLM2), str(FAULTED), "--out", str(tmp_path)]) == 0
    lines = (tmp_path / "matrix.md").read_text().splitlines()
    assert "| id | level | title | #1 tiny-random | #2 smollm2 | #3 tiny-random |" in lines
    assert (
        "| MSG-003 | MUST | stop\\_sequence is null unless a stop sequence ended the turn | PASS | PASS | FAIL |"
        in lines
    )
    assert "| STREAM-003 | MUST | No data: \\[DONE\\] | PASS | PASS | FAIL |" in lines
    assert "| MSG-021 | MUST | A turn that ends by itself reports end\\_turn | — | PASS | SKIP |" in lines
    assert "| TOKENS-001 | MUST | count\\_tokens agrees with usage.input\\_tokens | — | PASS | — |" in lines
    assert sum(line.startswith(("| MSG-", "| STREAM-", "| TOKENS-")) for line in lines) == 26
    assert any("20261201T113752Z-6109" in line and "MUST 23/23 pass" in line for line in lines)


def test_runs_of_different_suite_versions_share_their_common_rows(tmp_path):
    newer = load_run(SMOLLM2)
    index = json.loads(json.dumps(newer.index))
    index["suite"]["version"] = "0.2.0"
    index["properties"] = [p for p in index["properties"] if p["id"] != "MSG-001"]  # retired there
    matrix = build_matrix([load_run(CLEAN), Run(newer.directory, index)], tmp_path)
    text = render_markdown(matrix)
    assert "17 of 26 properties are shared by all 2 runs" in text
    assert "(suite versions 0.1.0, 0.2.0)" in text
    assert "| MSG-001 | MUST | A valid request gets a Message | PASS | — |" in text
    page = render_html(matrix)
    assert "MSG-001, MSG-002" not in page  # the shared set lists only what both had
    assert "MSG-002, MSG-003" in page


def test_requirement_text_is_escaped(tmp_path):
    run = load_run(CLEAN)
    index = json.loads(json.dumps(run.index))
    index["properties"][0]["title"] = "<script>alert(1)</script> [x]"
    page = render_html(build_matrix([Run(run.directory, index)], tmp_path))
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; [x]" in page


@pytest.mark.parametrize("broken", ["missing", "not-json", "not-an-index"])
def test_an_unreadable_run_is_exit_2(tmp_path, broken, capsys):
    run = tmp_path / "t" / "r1"
    if broken != "missing":
        run.mkdir(parents=True)
        (run / "index.json").write_text("{" if broken == "not-json" else '{"properties": 3}')
    shutil.copytree(CLEAN, tmp_path / "good")
    assert main(["matrix", str(tmp_path / "good"), str(run), "--out", str(tmp_path / "out")]) == 2
    assert "unreadable run" in capsys.readouterr().err
    assert not (tmp_path / "out" / "matrix.html").exists()


def test_subcommands_leave_the_run_invocation_alone(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["matrix", "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: plumbline matrix")
    with pytest.raises(SystemExit) as exit_info:
        main(["--target", "http://127.0.0.1:1", "--bogus"])
    assert exit_info.value.code == 2
    assert "plumbline: error: unrecognized arguments: --bogus" in capsys.readouterr().err
