"""One way to reach the API server: a kubeconfig or the pod's own ServiceAccount, loaded into a
configuration of its own (never the `kubernetes` client's process-wide default, which another caller
may have loaded differently).

kubectl's order is the default: a kubeconfig named, else `KUBECONFIG` or `~/.kube/config`, else the
pod's ServiceAccount. A process that runs in its pod (the operator, the process node's kubelet
stand-in) asks for the ServiceAccount first, so that a kubeconfig left in its image never wins. The
proxy the environment names is read once, not before every request (docs/benchmarks.md has its cost)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client, config

IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class NoClusterError(Exception):
    """Neither a kubeconfig that loads nor a pod's ServiceAccount: the message says what was tried."""


@dataclass(frozen=True)
class Connection:
    api_client: client.ApiClient
    namespace: str | None  # the kubeconfig context's, or the pod's own; None when neither names one


def connect(
    kubeconfig: str | Path | None = None,
    context: str | None = None,
    *,
    in_cluster_first: bool = False,
    retries: int | None = None,
    pool_size: int | None = None,
) -> Connection:
    """The API server, as the order above finds it; NoClusterError when nothing does. `retries`: how often
    urllib3 repeats a request that could not connect or timed out, unseen (None: its default, 3), which
    multiplies the time a request can take; `pool_size`: connections kept per host (None: the client's
    default), for callers with more threads than that."""
    if in_cluster_first:
        try:
            configuration, namespace = _in_cluster()
        except NoClusterError:
            configuration, namespace = _from_kubeconfig(kubeconfig, context)
    elif kubeconfig is not None or context is not None or _default_kubeconfig_exists():
        configuration, namespace = _from_kubeconfig(kubeconfig, context)
    else:
        configuration, namespace = _in_cluster()
    configuration.retries = retries
    if pool_size is not None:
        configuration.connection_pool_maxsize = pool_size
    api_client = client.ApiClient(configuration)
    api_client.configuration.proxy = api_client.configuration.proxy
    return Connection(api_client, namespace)


def _in_cluster() -> tuple[client.Configuration, str | None]:
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except config.ConfigException as error:
        raise NoClusterError(f"no kubeconfig ({default_kubeconfig()}) and not in a cluster: {error}") from None
    return configuration, IN_CLUSTER_NAMESPACE.read_text().strip() if IN_CLUSTER_NAMESPACE.exists() else None


def _from_kubeconfig(kubeconfig: str | Path | None, context: str | None) -> tuple[client.Configuration, str | None]:
    """The kubeconfig's context (`context`, else its current one), and that context's namespace."""
    path = str(kubeconfig) if kubeconfig is not None else None
    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=path, context=context, client_configuration=configuration)  # type: ignore[no-untyped-call]
        contexts, active = config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
    except config.ConfigException as error:
        raise NoClusterError(f"kubeconfig {path or default_kubeconfig()}: {error}") from None
    chosen = next((entry for entry in contexts if entry["name"] == context), active) if context else active
    return configuration, (chosen or {}).get("context", {}).get("namespace")


def default_kubeconfig() -> str:
    return os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())


def _default_kubeconfig_exists() -> bool:
    return any(Path(path).expanduser().exists() for path in default_kubeconfig().split(os.pathsep) if path)
