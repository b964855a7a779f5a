"""The memory app's URLs: each package's console pages and API paths, in one list each."""

from memory.consolidation import urls as consolidation_urls
from memory.conversations import urls as conversations_urls
from memory.gate import urls as gate_urls
from memory.lifecycle import urls as lifecycle_urls
from memory.provenance import urls as provenance_urls
from memory.recall import urls as recall_urls
from memory.reconciler import urls as reconciler_urls
from memory.skills import urls as skills_urls

PACKAGES = [
    lifecycle_urls,
    provenance_urls,
    consolidation_urls,
    gate_urls,
    conversations_urls,
    recall_urls,
    skills_urls,
    reconciler_urls,
]

urlpatterns = [pattern for package in PACKAGES for pattern in package.urlpatterns]
api_urlpatterns = [pattern for package in PACKAGES for pattern in package.api_urlpatterns]
