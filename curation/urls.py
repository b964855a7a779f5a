"""The curation app's URLs: each package's console pages and API paths, in one list each."""

from curation.dreaming import urls as dreaming_urls
from curation.search import urls as search_urls
from curation.status import urls as status_urls

PACKAGES = [status_urls, dreaming_urls, search_urls]

urlpatterns = [pattern for package in PACKAGES for pattern in package.urlpatterns]
api_urlpatterns = [pattern for package in PACKAGES for pattern in package.api_urlpatterns]
