"""The API client the operator builds from a kubeconfig (`disttrain_kube.connect`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from disttrain_kube.connection import connect

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: secret}}]
contexts: [{name: local, context: {cluster: local, user: admin}}]
current-context: local
"""


def _no_scan() -> dict[str, str]:
    raise AssertionError("the environment was scanned for a proxy again")


def test_the_environment_proxy_is_read_once_not_before_every_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    monkeypatch.setattr("kubernetes.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setattr(client.Configuration, "_default", None)
    configuration = connect(in_cluster_first=True).api_client.configuration
    monkeypatch.setattr("kubernetes.client.configuration.getproxies", _no_scan)
    assert configuration.auth_settings()["BearerToken"]["value"] == "Bearer secret"
    assert (configuration.host, configuration.proxy) == ("https://127.0.0.1:6443", "http://proxy.example:3128")
