"""The repository as the tests read it: its root, examples and corpus of manifests, and how a corpus file says
what its rejection must contain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from disttrain_core.api import yaml_io

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
VALID_CORPUS = sorted((ROOT / "tests" / "corpus" / "valid").glob("*.yaml"))
INVALID_CORPUS = sorted((ROOT / "tests" / "corpus" / "invalid").glob("*.yaml"))
EXPECT_PREFIX = "# expect: "


def load_one(path: Path) -> Any:
    (document,) = yaml_io.load_all(path.read_text())
    return document


def expected_message(path: Path) -> str:
    """An invalid corpus file names, in its first line, a text every rejection of it must contain."""
    first = path.read_text().splitlines()[0]
    assert first.startswith(EXPECT_PREFIX), f"{path} must start with '{EXPECT_PREFIX}...'"
    return first.removeprefix(EXPECT_PREFIX)
