import shutil

import pytest


@pytest.fixture(scope="session", autouse=True)
def _material_originals_removed():
    """Originals written by this run's tests live in a folder of their own; remove it after."""
    yield
    from django.core.files.storage import storages

    location = getattr(storages["materials"], "location", None)
    if location and "test-media" in str(location):
        shutil.rmtree(location, ignore_errors=True)
