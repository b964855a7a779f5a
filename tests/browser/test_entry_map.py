"""The Entries map: entries as nodes, relations as edges with their evidence, what cites an entry
on demand, and a keyboard walk that reaches every node's neighbours."""

import time

import pytest

from knowledge.models import Entry, EntryRelation
from tests.browser.conftest import login
from tests.factory import make_entry, make_memory

pytestmark = pytest.mark.browser


def _neighbours(entries) -> dict[int, set[int]]:
    near = {e.pk: set() for e in entries}
    for r in EntryRelation.objects.filter(source__in=entries):
        near[r.source_id].add(r.target_id)
        near[r.target_id].add(r.source_id)
    return near


def _relate(source, predicate, target, ref):
    return EntryRelation.objects.create(
        source=source,
        predicate=predicate,
        target=target,
        sources=[{"kind": "ticket", "ref": ref}],
        author_kind="person",
        author_name="adam",
    )


def _shown_neighbours(page) -> set[int]:
    return {int(b.get_attribute("data-node")) for b in page.locator("#graph-selected [data-node]").all()}


def test_the_keyboard_walk_reaches_every_nodes_neighbours_and_shows_the_evidence(page, world):
    vpn = make_entry(world.copilot, name="VPN client", type="system")
    gateway = make_entry(world.copilot, name="Gateway", type="system")
    ana = make_entry(world.copilot, name="Ana", type="person")
    office = make_entry(world.copilot, name="Lisbon office", type="site")
    make_entry(world.copilot, name="Zeta lonely", type="system")
    _relate(vpn, "connects to", gateway, "T-41")
    _relate(ana, "maintains", vpn, "T-42")
    _relate(gateway, "located in", office, "T-43")
    make_memory(
        world.copilot,
        "The VPN client needs version 5.2.1",
        store="shared",
        sources=[{"kind": "entry", "ref": str(vpn.pk)}],
    )
    entries = list(Entry.objects.all())
    near = _neighbours(entries)
    names = sorted(entries, key=lambda e: (e.name, e.pk))

    login(page, "adam")
    page.goto("/knowledge/entries/")
    page.click("a:has-text('Map')")
    page.locator("#graph[data-ready='5']").wait_for()
    page.focus("#graph")
    for entry in names:  # n walks through every entry by name; each lists all of its neighbours
        page.keyboard.press("n")
        page.locator(f"#graph-selected h3:has-text('{entry.name}')").wait_for()
        assert _shown_neighbours(page) == near[entry.pk], entry.name

    page.focus("#graph")
    page.keyboard.press("n")  # back to the first by name: Ana, who maintains the VPN client
    page.locator("#graph-selected h3:has-text('Ana')").wait_for()
    page.keyboard.press("ArrowRight")
    hover = page.locator("#graph-hover")
    assert "Ana — maintains → VPN client; evidence: ticket T-42" in hover.inner_text()
    page.keyboard.press("Enter")  # walk to the neighbour
    page.locator("#graph-selected h3:has-text('VPN client')").wait_for()
    assert _shown_neighbours(page) == {ana.pk, gateway.pk}

    page.click("#graph-selected button:has-text('Gateway')")  # the same walk by buttons (Tab, Enter)
    page.locator("#graph-selected h3:has-text('Gateway')").wait_for()
    page.click("#graph-selected button:has-text('VPN client')")
    page.click("button:has-text('Show what cites it')")
    page.locator("#graph-citing li:has-text('The VPN client needs version 5.2.1')").wait_for()

    page.goto("/knowledge/entries/graph?type=person")
    page.locator("#graph[data-ready='1']").wait_for()  # filtered by type: Ana alone


def test_two_thousand_entries_open_and_the_panel_stacks_on_a_phone(page, world):
    owner = world.copilot
    Entry.objects.bulk_create(
        Entry(name=f"Entry {i:04d}", type=("system", "person", "site")[i % 3], store="shared", owner=owner)
        for i in range(2000)
    )
    entries = list(Entry.objects.order_by("name", "id"))
    EntryRelation.objects.bulk_create(
        EntryRelation(
            source=entries[i],
            predicate="depends on",
            target=entries[(i * 7 + 3) % 2000],
            sources=[{"kind": "ticket", "ref": f"T-{i}"}],
            author_kind="person",
            author_name="adam",
        )
        for i in range(0, 2000, 2)
    )
    login(page, "adam")
    started = time.perf_counter()
    page.goto("/knowledge/entries/graph")
    page.locator("#graph[data-ready='2000']").wait_for()
    marks = page.evaluate(
        "() => [performance.getEntriesByType('navigation')[0].responseEnd,"
        " performance.getEntriesByName('graph-ready')[0].startTime,"
        " performance.getEntriesByName('graph-start')[0].startTime,"
        " performance.getEntriesByName('graph-drawn')[0].startTime]"
    )
    print(
        f"2,000 entries: drawn {time.perf_counter() - started:.2f} s after the request; "
        f"page received at {marks[0]:.0f} ms, script started at {marks[2]:.0f} ms, map ready at {marks[1]:.0f} ms"
    )
    page.focus("#graph")
    page.keyboard.press("n")
    first = entries[0]
    page.locator(f"#graph-selected h3:has-text('{first.name}')").wait_for()
    assert _shown_neighbours(page) == _neighbours(entries)[first.pk]

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/knowledge/entries/graph?type=site")
    page.locator("#graph[data-ready]").wait_for()
    graph, panel = page.locator("#graph").bounding_box(), page.locator(".graph-panel").bounding_box()
    assert panel["y"] >= graph["y"] + graph["height"] and panel["width"] <= 390
