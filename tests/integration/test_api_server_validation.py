"""The real API server and `disttrain render` give the same verdict, with the CRD's messages."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from disttrain_core.api.parsing import parse_job
from disttrain_core.api.validation import InvalidManifestError, validated
from disttrain_core.kueue import QUEUE_LABEL
from disttrain_dev.polling import wait_for
from support.job_builder import JobBuilder
from support.kube_cluster import OPERATOR_TEST_NAMESPACE, Cluster
from support.operator_process import OperatorProcess
from support.repository import EXAMPLES, INVALID_CORPUS, ROOT, VALID_CORPUS, expected_message, load_one


def test_crd_is_established_and_applies_client_side(cluster: Cluster) -> None:
    crd = cluster.get("crd", "disttrainjobs.disttrain.io", "default")
    assert crd is not None
    established = [c for c in crd["status"]["conditions"] if c["type"] == "Established"]
    assert established[0]["status"] == "True"
    # A client-side apply stores the whole CRD in an annotation; it must fit.
    cluster.kubectl("apply", "--dry-run=server", "-k", str(ROOT / "crds"))


def test_deploy_applies_and_its_pod_meets_restricted_pod_security(cluster: Cluster) -> None:
    """The namespace enforces `restricted`: the operator pod exists only if it complies."""
    try:
        cluster.kubectl("apply", "--server-side", "-k", str(ROOT / "deploy"))
        wait_for(
            "the operator pod in disttrain-system",
            lambda: cluster.items("pods", "disttrain-system", "app.kubernetes.io/name=disttrain-operator"),
            timeout=60,
        )
    finally:
        cluster.kubectl("delete", "namespace", "disttrain-system", "--ignore-not-found", "--wait=false")
        cluster.kubectl("delete", "clusterrolebinding,clusterrole", "disttrain-operator", "--ignore-not-found")


def test_every_example_applies_and_its_pods_pass_restricted_pod_security(
    cluster: Cluster, operator: OperatorProcess, namespace: str
) -> None:
    """The test namespace enforces `restricted`: the operator gets every example's pods past it."""
    for example in EXAMPLES:
        cluster.kubectl("apply", "-n", namespace, "-f", str(example))
    names = cluster.kubectl("get", "dtj", "-n", namespace, "-o", "name").stdout.split()
    assert len(names) == len(EXAMPLES)
    expected = sum(parse_job(load_one(example)).spec.total_replicas for example in EXAMPLES)
    wait_for(f"{expected} pods", lambda: len(cluster.items("pods", namespace)) == expected, timeout=60)
    assert not cluster.has_event(namespace, "CreateFailed")


@pytest.mark.parametrize("path", VALID_CORPUS, ids=lambda path: path.stem)
def test_valid_corpus_is_accepted_by_both(cluster: Cluster, dry_run_namespace: str, path: Path) -> None:
    validated(load_one(path))
    cluster.kubectl("apply", "--dry-run=server", "-n", dry_run_namespace, "-f", str(path))


@pytest.mark.parametrize("path", INVALID_CORPUS, ids=lambda path: path.stem)
def test_invalid_corpus_is_refused_by_both_with_the_same_message(
    cluster: Cluster, dry_run_namespace: str, path: Path
) -> None:
    expected = expected_message(path)
    with pytest.raises(InvalidManifestError) as raised:
        validated(load_one(path))
    assert expected in str(raised.value)
    result = cluster.kubectl("apply", "--dry-run=server", "-n", dry_run_namespace, "-f", str(path), check=False)
    assert result.returncode != 0, f"the API server accepted {path.name}"
    assert expected in result.stderr, result.stderr


def _can(cluster: Cluster, service_account: str, *request: str) -> bool:
    answer = cluster.kubectl("auth", "can-i", *request, f"--as=system:serviceaccount:{service_account}", check=False)
    return answer.stdout.strip() == "yes"


def test_single_namespace_mode_keeps_the_operator_apart_from_the_jobs(cluster: Cluster) -> None:
    """deploy/namespaced/: the operator runs in disttrain-system with a Role in `disttrain` alone; it may do
    nothing in its own namespace but hold its Lease (no tenant's pod can run as it there), read no Secret,
    and reach no other namespace."""
    account = "disttrain-system:disttrain-operator"
    found = cluster.kubectl("get", "namespace", "disttrain-system", "-o", "json", check=False)
    if found.returncode == 0 and json.loads(found.stdout)["metadata"].get("deletionTimestamp"):
        # an earlier test's install is still going: nothing can be made in a namespace being deleted
        cluster.kubectl("wait", "--for=delete", "namespace/disttrain-system", "--timeout=120s")
    try:
        cluster.kubectl("apply", "--server-side", "-k", str(ROOT / "deploy" / "namespaced"))
        wait_for(
            "the operator pod in disttrain-system",
            lambda: cluster.items("pods", "disttrain-system", "app.kubernetes.io/name=disttrain-operator"),
            timeout=60,
        )
        assert _can(cluster, account, "create", "pods", "-n", "disttrain")
        assert _can(cluster, account, "patch", "disttrainjobs.disttrain.io/status", "-n", "disttrain")
        assert _can(cluster, account, "update", "leases.coordination.k8s.io", "-n", "disttrain-system")
        assert not _can(cluster, account, "create", "pods", "-n", "disttrain-system")
        assert not _can(cluster, account, "get", "secrets", "-n", "disttrain")
        assert not _can(cluster, account, "create", "pods", "-n", "default")
        assert not _can(cluster, account, "list", "disttrainjobs.disttrain.io", "--all-namespaces")
    finally:
        cluster.kubectl("delete", "namespace", "disttrain", "--ignore-not-found", "--wait=false")
        operator_objects = [
            "deployment/disttrain-operator",
            "poddisruptionbudget/disttrain-operator",
            "service/disttrain-operator-metrics",
            "serviceaccount/disttrain-operator",
            "role/disttrain-operator-leader-election",
            "rolebinding/disttrain-operator-leader-election",
        ]
        cluster.kubectl("delete", "-n", "disttrain-system", *operator_objects, "--ignore-not-found")
        cluster.kubectl(
            "delete", "clusterrolebinding,clusterrole", "disttrain-operator-namespaced", "--ignore-not-found"
        )


def test_the_operator_under_test_runs_with_deploys_rules_only(cluster: Cluster, operator: OperatorProcess) -> None:
    """The suite's operator holds its own ServiceAccount's token: it may run jobs, never read Secrets or exec."""
    account = f"{OPERATOR_TEST_NAMESPACE}:disttrain-operator"
    assert _can(cluster, account, "create", "pods", "-n", "default")
    assert not _can(cluster, account, "get", "secrets", "-n", "default")
    assert _can(cluster, account, "create", "deployments.apps", "-n", "default")  # a job's TensorBoard
    assert not _can(cluster, account, "delete", "deployments.apps", "-n", "default")  # they go with their job
    assert not _can(cluster, account, "create", "pods", "--subresource=exec", "-n", "default")
    assert operator.identity() == f"system:serviceaccount:{account}"


def _grant(cluster: Cluster, namespace: str, user: str, *rules: dict[str, Any]) -> None:
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": user}, "rules": rules}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": user},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    cluster.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": [role, binding]}),
    )


def test_a_job_cannot_get_its_submitter_pods_they_may_not_create(cluster: Cluster, namespace: str) -> None:
    """deploy/admission: impersonated users (`kubectl --as`) against the API server's own checks."""
    cluster.kubectl("apply", "--server-side", "-f", str(ROOT / "deploy" / "admission" / "policy.yaml"))
    jobs = {"apiGroups": ["disttrain.io"], "resources": ["disttrainjobs"], "verbs": ["create"]}
    pods = {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}
    tokens = {
        "apiGroups": [""],
        "resources": ["serviceaccounts/token"],
        "verbs": ["create"],
        "resourceNames": ["trainer"],
    }
    _grant(cluster, namespace, "alice", jobs)
    _grant(cluster, namespace, "bob", jobs, pods)
    _grant(cluster, namespace, "dave", jobs, pods, tokens)
    plain = (ROOT / "examples" / "multi-worker-mirrored-gpu.yaml").read_text()
    as_trainer = plain.replace("automountServiceAccountToken: false", "serviceAccountName: trainer")

    def submit(user: str, manifest: str) -> subprocess.CompletedProcess[str]:
        return cluster.kubectl(
            "create", "--dry-run=server", "-n", namespace, f"--as={user}", "-f", "-", stdin=manifest, check=False
        )

    def refused(user: str, manifest: str) -> str | None:
        answer = submit(user, manifest)
        return answer.stderr if answer.returncode != 0 and "denied request" in answer.stderr else None

    message = wait_for("the policy to refuse alice", lambda: refused("alice", plain), timeout=30)
    assert f"alice may not create pods in namespace {namespace}" in message
    assert submit("bob", plain).returncode == 0
    assert "may not create tokens" in (refused("bob", as_trainer) or "")
    assert submit("dave", as_trainer).returncode == 0
    by_alias = plain.replace("automountServiceAccountToken: false", "serviceAccount: trainer")  # the older name
    assert "may not create tokens for them" in (refused("bob", by_alias) or "")
    assert submit("dave", by_alias).returncode == 0


@pytest.fixture
def operator_paused(operator: OperatorProcess) -> Iterator[None]:
    """The suite's operator stopped meanwhile: where Kueue's CRDs are on the cluster (its modules leave them), it
    suspends a resumed job that names a queue again at once, as Kueue would until it admits it."""
    with operator.stopped():
        yield


def test_an_update_is_asked_again_only_when_it_changes_the_pods_and_a_running_job_keeps_its_queue(
    cluster: Cluster, namespace: str, operator_paused: None
) -> None:
    """An account that may update jobs but not create pods (as Kueue's or the operator's suspend and resume)
    passes deploy/admission when the pods' templates stay; a queued job's queue label moves only while it is
    suspended."""
    cluster.kubectl("apply", "--server-side", "-f", str(ROOT / "deploy" / "admission" / "policy.yaml"))
    updates = {"apiGroups": ["disttrain.io"], "resources": ["disttrainjobs"], "verbs": ["get", "update", "patch"]}
    _grant(cluster, namespace, "erin", updates)
    queued = JobBuilder("queued").workers(1).metadata(labels={QUEUE_LABEL: "team"}).run_policy(suspend=True).obj()
    cluster.apply(namespace, json.dumps(queued))

    def patch(user: str, change: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return cluster.kubectl(
            "patch", "disttrainjob", "queued", "-n", namespace, "--type=merge", f"--as={user}",
            "-p", json.dumps(change), "--dry-run=server", check=False,
        )  # fmt: skip

    template = {"spec": {"replicaSpecs": {"Worker": {"template": {"metadata": {"labels": {"changed": "yes"}}}}}}}
    wait_for("the policy to ask erin", lambda: "may not create pods" in patch("erin", template).stderr, timeout=30)
    assert patch("erin", {"spec": {"runPolicy": {"suspend": False}}}).returncode == 0
    assert patch("erin", {"metadata": {"labels": {QUEUE_LABEL: "other"}}}).returncode == 0  # suspended: it may move

    def move_while_running() -> subprocess.CompletedProcess[str] | None:
        """The move asked of the job as the admin's resume left it: the patch names that resourceVersion, so
        where anything wrote the job meanwhile (an operator's status, a suspension), the API server answers
        Conflict before the policy sees it, and the resume is asked again."""
        resumed = cluster.kubectl(
            "patch", "disttrainjob", "queued", "-n", namespace, "--type=merge",
            "-p", '{"spec":{"runPolicy":{"suspend":false}}}', "-o", "jsonpath={.metadata.resourceVersion}",
        ).stdout  # fmt: skip
        moved = patch("erin", {"metadata": {"resourceVersion": resumed, "labels": {QUEUE_LABEL: "other"}}})
        return None if "the object has been modified" in moved.stderr else moved

    moved = wait_for("a move asked of the running job", move_while_running)
    assert moved.returncode != 0 and "may change only while the job is suspended" in moved.stderr


def test_a_job_of_its_own_service_account_takes_kueues_placement_from_a_component_without_token_rights(
    cluster: Cluster, namespace: str, operator_paused: None
) -> None:
    """Kueue's admission (node selector, tolerations, the pod set's labels and annotations) and its eviction's
    restore, written by the operator (which may create pods but no tokens) or by Kueue's controller (which may
    patch Workloads' status but create neither pods nor tokens, as its RBAC markers give it): not asked about
    the job's ServiceAccount or pods again. A change to what runs as that account (an image, a command) is."""
    cluster.kubectl("apply", "--server-side", "-f", str(ROOT / "deploy" / "admission" / "policy.yaml"))
    updates = {"apiGroups": ["disttrain.io"], "resources": ["disttrainjobs"], "verbs": ["get", "update", "patch"]}
    pods = {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}
    workloads = {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["patch"]}
    _grant(cluster, namespace, "operator-like", updates, pods)
    _grant(cluster, namespace, "kueue-like", updates, workloads)
    cluster.kubectl("create", "serviceaccount", "trainer", "-n", namespace)
    own = JobBuilder("own-account").workers(1).pod_spec(serviceAccountName="trainer").run_policy(suspend=True)
    cluster.apply(namespace, json.dumps(own.metadata(labels={QUEUE_LABEL: "team"}).obj()))

    def patch(user: str, change: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return cluster.kubectl(
            "patch", "disttrainjob", "own-account", "-n", namespace, "--type=merge", f"--as={user}",
            "-p", json.dumps(change), "--dry-run=server", check=False,
        )  # fmt: skip

    def worker(template: dict[str, Any]) -> dict[str, Any]:
        return {"spec": {"replicaSpecs": {"Worker": {"template": template}}}}

    image = worker({"spec": {"containers": [{"name": "tensorflow", "image": "another:1"}]}})
    refused = wait_for(
        "the policy to ask again", lambda: "may not create tokens" in patch("operator-like", image).stderr, timeout=30
    )
    assert refused and "may not create pods" in patch("kueue-like", image).stderr
    admitted = worker(
        {
            "metadata": {"labels": {"kueue.x-k8s.io/podset": "worker"}, "annotations": {"flavor": "a100"}},
            "spec": {
                "nodeSelector": {"cloud.example.com/gpu": "a100"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}],
            },
        }
    )
    restored = worker(
        {"metadata": {"labels": None, "annotations": None}, "spec": {"nodeSelector": None, "schedulingGates": None}}
    )
    for user in ("operator-like", "kueue-like"):
        allowed = patch(user, {**admitted, "spec": {**admitted["spec"], "runPolicy": {"suspend": False}}})
        assert allowed.returncode == 0, allowed.stderr
    cluster.kubectl("patch", "disttrainjob", "own-account", "-n", namespace, "--type=merge", "-p", json.dumps(admitted))
    for user in ("operator-like", "kueue-like"):
        put_back = patch(user, {**restored, "spec": {**restored["spec"], "runPolicy": {"suspend": True}}})
        assert put_back.returncode == 0, put_back.stderr
