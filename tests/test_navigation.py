"""The menu and the Knowledge tab bar render from one list (brainsite.navigation)."""

import re

from django.test import Client
from django.urls import reverse

from brainsite.navigation import KNOWLEDGE_TABS, NAVIGATION


def _page(user, url):
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode()


def _current(html):
    return re.findall(r'<a href="([^"]+)" aria-current="page">', html)


def test_every_link_of_the_list_is_in_the_menu_and_admin_links_only_for_admins(world):
    admin, reviewer = _page(world.admin, "/"), _page(world.reviewer, "/")
    for group in NAVIGATION:
        assert f"{group.label}</summary>" in admin or f">{group.label} " in admin
        for link in group.links:
            href = f'href="{reverse(link.url_name)}"'
            assert href in admin, link.label
            assert (href in reviewer) != link.admin, link.label


def test_the_knowledge_tab_bar_and_the_menu_mark_the_page_they_are_on(world):
    html = _page(world.reviewer, reverse("material-list"))
    bar = html[html.index('<nav class="tabs" aria-label="Knowledge">') :]
    bar = bar[: bar.index("</nav>")]
    assert re.findall(r'href="([^"]+)"', bar) == [reverse(t.url_name) for t in KNOWLEDGE_TABS]
    assert _current(bar) == [reverse("material-list")]
    # In the menu the Knowledge page's link is current, and its group.
    assert reverse("entry-list") in _current(html)
    assert '<summary class="current">Knowledge</summary>' in html
    status = _page(world.reviewer, reverse("knowledge-status"))
    assert '<summary class="current">Operations</summary>' in status
    assert reverse("entry-list") not in _current(status)
