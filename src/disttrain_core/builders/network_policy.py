"""The NetworkPolicy that closes a job's trainer pods to everyone but the job itself and the operator.

TensorFlow's gRPC server and coordination service run operations for any client that connects, and
TensorFlow's own security guidance is to run them only on a trusted network: a pod of another job (of
another tenant) that reaches a worker's port can read the job's files and tokens or stop it. So the job's
own pods reach its trainers on every port (collectives such as NCCL open ports of their own beside
TensorFlow's), the operator reaches the progress port it polls, and nothing else gets in. It holds where
the cluster's network enforces NetworkPolicy; an install turns it off (`DISTTRAIN_NETWORK_POLICY=false`)
where the cluster's own policies say who may talk to whom."""

from __future__ import annotations

from disttrain_core import naming
from disttrain_core.api.job import DistTrainJob
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.types import Manifest

# The operator's pods carry this label in every install (deploy/operator, the chart).
OPERATOR_LABELS = {"app.kubernetes.io/name": "disttrain-operator"}
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace


def trainer_selector(job_name: str) -> Manifest:
    """The job's trainer pods: its replicas, not its TensorBoard or a log reader."""
    return {
        "matchLabels": naming.job_labels(job_name),
        "matchExpressions": [{"key": naming.REPLICA_TYPE_LABEL, "operator": "Exists"}],
    }


def operator_peer(settings: BuildSettings) -> Manifest:
    """The operator's pods: in its own namespace where it knows it, else wherever they run."""
    namespace = settings.operator_namespace
    namespaces = {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}} if namespace else {}
    return {"namespaceSelector": namespaces, "podSelector": {"matchLabels": OPERATOR_LABELS}}


def network_policy(job: DistTrainJob, settings: BuildSettings, metadata: Manifest) -> Manifest:
    """`metadata`: the job's child's (name, namespace, labels, owner)."""
    progress = [{"port": job.spec.progress_port, "protocol": "TCP"}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata,
        "spec": {
            "podSelector": trainer_selector(job.metadata.name),
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [{"podSelector": {"matchLabels": naming.job_labels(job.metadata.name)}}]},
                {"from": [operator_peer(settings)], "ports": progress},
            ],
        },
    }
