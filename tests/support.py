"""Paths, loaders and a local HTTP server, shared by the tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from disttrain_core.api import yaml_io

ROOT = Path(__file__).resolve().parent.parent
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


@contextmanager
def http_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    """A server on a free local port answering with `handler`, on a thread of its own, until the block ends;
    its loop looks for the shutdown every 20 ms (Python's default, 0.5 s, was most of these tests' time)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
