"""`disttrain_kube.connect`, the one way every part of disttrain reaches the API server."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from disttrain_kube.connection import NoClusterError, connect


def _kubeconfig(path: Path, server: str, namespace: str | None = None) -> Path:
    context = f"{{cluster: c, user: u{', namespace: ' + namespace if namespace else ''}}}"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f'clusters: [{{name: c, cluster: {{server: "{server}", insecure-skip-tls-verify: true}}}}]\n'
        "users: [{name: u, user: {token: secret}}]\n"
        f"contexts: [{{name: here, context: {context}}}]\ncurrent-context: here\n"
    )
    return path


@pytest.fixture
def outside_a_pod(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No ServiceAccount mounted, and the default kubeconfig (as kubectl finds it) at a path the test picks."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    default = tmp_path / "default-kubeconfig"
    monkeypatch.setenv("KUBECONFIG", str(default))
    monkeypatch.setattr("kubernetes.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION", str(default))
    return default


def test_a_named_kubeconfig_gives_its_server_and_its_contexts_namespace(outside_a_pod: Path, tmp_path: Path) -> None:
    connection = connect(_kubeconfig(tmp_path / "named", "https://10.0.0.1:6443", namespace="research"))
    assert connection.api_client.configuration.host == "https://10.0.0.1:6443"
    assert connection.namespace == "research"


def test_each_connection_has_its_own_configuration_not_the_process_wide_default(
    outside_a_pod: Path, tmp_path: Path
) -> None:
    first = connect(_kubeconfig(tmp_path / "first", "https://10.0.0.1:6443"))
    second = connect(_kubeconfig(tmp_path / "second", "https://10.0.0.2:6443"), pool_size=40, retries=0)
    assert first.api_client.configuration.host == "https://10.0.0.1:6443"
    assert (second.api_client.configuration.connection_pool_maxsize, second.api_client.configuration.retries) == (40, 0)
    assert client.Configuration.get_default_copy().host != "https://10.0.0.2:6443"


def test_a_process_in_its_pod_falls_back_to_the_kubeconfig_outside_one(outside_a_pod: Path) -> None:
    _kubeconfig(outside_a_pod, "https://10.0.0.3:6443")
    assert connect(in_cluster_first=True).api_client.configuration.host == "https://10.0.0.3:6443"


def test_neither_a_kubeconfig_nor_a_pod_says_both_were_tried(outside_a_pod: Path) -> None:
    with pytest.raises(NoClusterError, match=rf"no kubeconfig \({outside_a_pod}\) and not in a cluster"):
        connect()
