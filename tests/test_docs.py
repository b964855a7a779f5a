"""The docs stay short and true: docs/PERFORMANCE.md is exactly what `python -m bench render`
makes from the figures commands wrote, and neither it nor the architecture map grows past its
limit."""

import json
from pathlib import Path

from bench import results

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE_MAX_LINES = 700


def test_performance_md_is_rendered_from_the_results_files():
    assert results.DOC.read_text() == results.render(), "run `python -m bench render`"


def test_performance_md_fits_its_limit():
    assert results.DOC.read_text().count("\n") <= results.MAX_LINES


def test_every_results_file_names_its_command_date_and_commit():
    files = sorted(results.RESULTS.glob("*.json"))
    assert files
    for path in files:
        run = json.loads(path.read_text())
        assert run["command"] and run["date"] and run["commit"] and run["rows"], path.name
        assert all(len(row) == 5 for row in run["rows"]), path.name


def test_a_table_no_command_wrote_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    results.record(
        "demo", title="Demo", command="python -m bench demo", rows=[["x", 1.0, "ms", "", ""]], load_before=0.5
    )
    rendered = results.render()
    assert "`python -m bench demo` ·" in rendered and "| x | 1.0 ms |  |  |" in rendered
    assert results.DOC.read_text() != rendered  # the real doc is not this one: the check can fail


def test_architecture_md_fits_its_limit():
    lines = (ROOT / "docs" / "ARCHITECTURE.md").read_text().count("\n")
    assert lines <= ARCHITECTURE_MAX_LINES, f"docs/ARCHITECTURE.md has {lines} lines"
