"""The supported Kubernetes releases, written once: what `dev-cluster up --kubernetes` takes and refuses, the
flags each minor's control plane starts with, and each release's binaries cached apart
(an older one's servers alone)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from disttrain_core.api.kubernetes_version import KUBERNETES_VERSION, SUPPORTED_KUBERNETES, pinned_release
from disttrain_dev import versions
from disttrain_dev.command import dev_cluster


def test_the_default_is_the_newest_of_three_minors_each_at_one_patch() -> None:
    assert KUBERNETES_VERSION == SUPPORTED_KUBERNETES[-1] == "v1.37.2"
    minors = [release.split(".")[1] for release in SUPPORTED_KUBERNETES]
    assert minors == sorted(minors) and len(set(minors)) == 3


@pytest.mark.parametrize("asked", ["1.35", "v1.35", "1.35.4", "v1.35.4", " 1.35 "])
def test_a_release_is_named_by_its_minor_or_its_patch(asked: str) -> None:
    assert pinned_release(asked) == "v1.35.4"


@pytest.mark.parametrize("asked", ["1.34", "v1.35.3", "1.38", "latest", ""])
def test_a_release_outside_the_range_is_refused_at_once_with_the_range(asked: str) -> None:
    """Before anything is built: click answers with its usage error and the supported list."""
    result = CliRunner().invoke(dev_cluster, ["up", "--kubernetes", asked], standalone_mode=True)
    assert result.exit_code == 2
    assert "choose one of v1.35.4, v1.36.3, v1.37.2" in result.output


@pytest.mark.parametrize("release", SUPPORTED_KUBERNETES)
def test_each_release_has_its_control_plane_flags_and_a_cache_of_its_own(release: str) -> None:
    flags = versions.control_plane_flags(release)
    assert "GenericWorkload" in flags.feature_gates and flags.workload_api.startswith("scheduling.k8s.io/")
    assert release in versions.cache_paths(release).root.name
    others = {versions.cache_paths(other).root for other in SUPPORTED_KUBERNETES if other != release}
    assert versions.cache_paths(release).root not in others
    assert versions.staging_version(release) == "v0" + release.removeprefix("v1")


def test_only_1_37_drops_the_gates_it_folded_and_the_loopback_endpoints() -> None:
    newest = versions.control_plane_flags("v1.37.2")
    assert "GangScheduling" not in newest.feature_gates and newest.loopback_without_endpoints
    assert all(
        "GangScheduling" in versions.control_plane_flags(release).feature_gates for release in ("v1.35.4", "v1.36.3")
    )


@pytest.mark.parametrize("release", SUPPORTED_KUBERNETES[:-1])
def test_an_older_release_builds_its_servers_and_takes_the_default_s_kubectl_etcd_and_kwok(release: str) -> None:
    paths, default = versions.cache_paths(release), versions.cache_paths()
    assert paths.own_binaries == versions.SERVER_COMMANDS
    assert all(paths.binary(name).parent == paths.bin for name in versions.SERVER_COMMANDS)
    assert [paths.binary(name) for name in ("kubectl", "etcd", "kwok")] == [
        default.binary(name) for name in ("kubectl", "etcd", "kwok")
    ]
    assert default.own_binaries == versions.ALL_BINARIES
