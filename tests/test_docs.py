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


def test_a_whole_make_bench_still_renders_within_the_limit(tmp_path, monkeypatch):
    # Thirty benchmarks of twelve figures each, one a day: the newest are tables, the rest a line
    # each that names its file.
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    for day in range(1, 31):
        rows = [[f"figure {i}", float(i), "ms", "", ""] for i in range(12)]
        body = {"title": f"Bench {day}", "command": f"python -m bench b{day}", "date": f"2026-11-{day:02d}"}
        body |= {"commit": "abc1234", "machine": "x86_64, 2 cores", "load": [0.1, 0.2], "rows": rows}
        (tmp_path / f"b{day:02d}.json").write_text(json.dumps(body))
    rendered = results.render()
    assert rendered.count("\n") <= results.MAX_LINES
    assert "## Bench 30\n" in rendered and "| figure 11 | 11.0 ms |" in rendered
    assert "- Bench 1 `python -m bench b1` · 2026-11-01 · [b01.json](perf-results/b01.json)" in rendered


def test_architecture_md_fits_its_limit():
    lines = (ROOT / "docs" / "ARCHITECTURE.md").read_text().count("\n")
    assert lines <= ARCHITECTURE_MAX_LINES, f"docs/ARCHITECTURE.md has {lines} lines"
