"""Tests that run real TensorFlow processes: marked `tensorflow`, skipped without TensorFlow (the trainer extra)."""

from __future__ import annotations

import importlib.util

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "trainer_processes" in item.path.parts:
            item.add_marker(pytest.mark.tensorflow)


def pytest_ignore_collect(collection_path: object) -> bool | None:
    if importlib.util.find_spec("tensorflow") is None:
        return True  # the trainer extra (tensorflow-cpu) is not installed
    return None
