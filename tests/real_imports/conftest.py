"""A real mem0ai for `make test-imports`: mem0ai 2.2.1, pinned, in its own venv under var/ (the
Makefile builds it; in Brain's venv it would pull protobuf 6 under onnxruntime's and
OpenTelemetry's 7). Skipped unless BRAIN_TEST_MEM0 names that venv's python."""

import os

import pytest


def pytest_collection_modifyitems(config, items):
    if os.environ.get("BRAIN_TEST_MEM0"):
        return
    skip = pytest.mark.skip(reason="a real mem0ai: run `make test-imports`")
    for item in items:
        if "real_imports" in str(item.fspath):
            item.add_marker(skip)
