"""The knowledge app's URLs: each package's console pages and API paths, in one list each."""

from knowledge.entries import urls as entries_urls
from knowledge.erasure import urls as erasure_urls
from knowledge.events import urls as events_urls
from knowledge.llm import urls as llm_urls
from knowledge.materials import urls as materials_urls
from knowledge.portability import urls as portability_urls
from knowledge.principals import urls as principals_urls
from knowledge.restore import urls as restore_urls

PACKAGES = [
    portability_urls,
    principals_urls,
    entries_urls,
    restore_urls,
    llm_urls,
    materials_urls,
    events_urls,
    erasure_urls,
]

urlpatterns = [pattern for package in PACKAGES for pattern in package.urlpatterns]
api_urlpatterns = [pattern for package in PACKAGES for pattern in package.api_urlpatterns]
