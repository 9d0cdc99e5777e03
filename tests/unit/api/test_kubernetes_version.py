"""The supported Kubernetes releases: a version's minor read from any spelling, and a release chosen by it."""

from __future__ import annotations

import pytest

from disttrain_core.api.kubernetes_version import (
    CONTAINER_RESTART_RULES_SINCE,
    KUBERNETES_VERSION,
    SUPPORTED_KUBERNETES,
    minor_of,
    pinned_release,
    restarts_containers_on_rules,
)


@pytest.mark.parametrize(
    ("version", "minor"),
    [("v1.37.2", (1, 37)), ("1.36", (1, 36)), ("v1.35.4+k3s1", (1, 35)), (" v1.38.0-beta.0 ", (1, 38)), ("next", None)],
)
def test_a_minor_is_read_from_each_way_of_writing_a_version(version: str, minor: tuple[int, int] | None) -> None:
    assert minor_of(version) == minor


def test_the_default_is_the_newest_supported_release_and_each_is_chosen_by_its_minor() -> None:
    assert SUPPORTED_KUBERNETES[-1] == KUBERNETES_VERSION
    for release in SUPPORTED_KUBERNETES:
        short = ".".join(release.lstrip("v").split(".")[:2])
        assert pinned_release(short) == pinned_release(f"v{short}") == pinned_release(release) == release


def test_a_release_outside_the_range_is_refused_naming_the_range() -> None:
    with pytest.raises(ValueError, match=f"choose one of {', '.join(SUPPORTED_KUBERNETES)}"):
        pinned_release("1.34")


def test_containers_restart_on_rules_from_their_minor_and_on_a_version_that_names_none() -> None:
    major, minor = CONTAINER_RESTART_RULES_SINCE
    assert restarts_containers_on_rules(f"v{major}.{minor}.0")
    assert not restarts_containers_on_rules(f"v{major}.{minor - 1}.9")
    assert restarts_containers_on_rules("unknown")
