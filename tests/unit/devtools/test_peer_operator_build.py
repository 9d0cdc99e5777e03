"""The peer's unthrottled build: its main.go with the client's rate limit lifted, or a clear error."""

from __future__ import annotations

import pytest

from disttrain_dev import peer

MAIN = """func main() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme: scheme,
	})
}
"""


def test_the_unthrottled_main_gives_the_manager_a_config_without_a_rate_limit() -> None:
    patched = peer.unthrottled_main(MAIN)
    assert "restConfig.QPS = -1" in patched
    assert "ctrl.NewManager(restConfig, ctrl.Options{" in patched
    assert "ctrl.NewManager(ctrl.GetConfigOrDie()" not in patched


@pytest.mark.parametrize("source", ["package main\n", MAIN + MAIN])
def test_a_main_without_a_single_manager_line_is_refused(source: str) -> None:
    with pytest.raises(ValueError, match="rate limit"):
        peer.unthrottled_main(source)


def test_the_cache_is_keyed_by_the_version() -> None:
    assert peer.VERSION in peer.peer_build().root.name
