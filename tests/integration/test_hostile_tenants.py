"""Two tenants of one cluster on the process node, as a shared install serves them: tenant A holds `edit` in
its own namespace only (Kubernetes' role, which takes disttrain's rules by aggregation) and tries what
anyone who may edit pods and ConfigMaps there can do to the operator's shared parts; tenant B meanwhile
runs a job whose worker fails once. B's job succeeds, keeps both attempts' logs, releases its pods, and its
logs are swept when their TTL ran out; A's own objects are handled within their bounds; the operator
stays up and logs no traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from disttrain import Client
from disttrain_dev import cluster as devcluster
from disttrain_dev.polling import wait_for
from support.job_builder import JobBuilder, two_attempts_job
from support.job_checks import holds, job_where
from support.kube_cluster import Cluster, token_kubeconfig
from support.operator_process import OperatorProcess
from support.repository import ROOT

USER_ROLES = ROOT / "deploy" / "user-roles" / "roles.yaml"
OUTLIVES = "disttrain.io/kept-past-job"
NAN_SCORES = '{"evaluation": {"step": 1, "metrics": {"loss": NaN, "auc": Infinity, "accuracy": 0.5}, "final": true}}'


def _tenant(cluster: Cluster, namespace: str, folder: Path) -> Cluster:
    """A ServiceAccount of `namespace` bound to Kubernetes' `edit` there, and nowhere else."""
    cluster.kubectl("apply", "--server-side", "-f", str(USER_ROLES))

    def aggregated() -> bool:
        edit = json.loads(cluster.kubectl("get", "clusterrole", "edit", "-o", "json").stdout)
        return any("disttrainjobs" in rule.get("resources", []) for rule in edit.get("rules") or [])

    wait_for("Kubernetes' edit to take disttrain's rules", aggregated)
    cluster.kubectl("create", "serviceaccount", "tenant", "-n", namespace)
    cluster.kubectl(
        "create", "rolebinding", "tenant-edits", "-n", namespace, "--clusterrole=edit",
        f"--serviceaccount={namespace}:tenant",
    )  # fmt: skip
    return Cluster(token_kubeconfig(cluster, folder, namespace, "tenant"))


def _forged_kept_log(name: str, annotations: dict[str, str]) -> str:
    """A ConfigMap labelled as a kept log that outlives its job, with notes no operator wrote."""
    labels = {OUTLIVES: "true", "disttrain.io/job-uid": f"forged-{name}", "disttrain.io/kept-log-of": "worker-0"}
    metadata = {"name": name, "labels": labels, "annotations": annotations}
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"log": "x"}})


def _evaluated_job() -> dict[str, Any]:
    """A worker that succeeds, and an Evaluator whose scores diverged (NaN, Infinity) as Python writes them."""
    script = f"sleep 2; printf '%s' '{NAN_SCORES}' > \"$DISTTRAIN_TERMINATION_MESSAGE_PATH\""
    evaluator = {"image": "none", "command": ["sh", "-c", script]}
    return JobBuilder("diverged").script("sleep 1; exit 0").replicas("Evaluator", 1, evaluator).obj()


def _tenant_a_writes_what_once_harmed_others(tenant: Cluster, a_namespace: str) -> None:
    """Pods that tell the kept-log keeper to keep -1 bytes (once an endless loop on a keeper thread); kept logs
    past their job with notes that once killed the sweeper (OverflowError) at each start; an Evaluator whose
    scores are no JSON numbers (once a status the API server refused for ever)."""
    tenant.apply(a_namespace, json.dumps(JobBuilder("noisy").script("echo start; sleep 4; echo end", 2).obj()))
    wait_for("A's pods", lambda: len(tenant.items("pods", a_namespace, "disttrain.io/job-name=noisy")) == 2)
    for index in (0, 1):
        tenant.kubectl("annotate", "pod", f"noisy-worker-{index}", "-n", a_namespace,
                       "disttrain.io/log-max-bytes=-1", "--overwrite")  # fmt: skip
    forged = {
        "huge-ttl": {"disttrain.io/log-ttl-seconds-after-job-deleted": "99999999999999999999"},
        "far-future": {
            "disttrain.io/job-gone-since": "9999-12-31T23:59:59Z",
            "disttrain.io/log-ttl-seconds-after-job-deleted": "7776000",
        },
        "garbage": {
            "disttrain.io/job-gone-since": "yesterday",
            "disttrain.io/log-ttl-seconds-after-job-deleted": "-5",
        },
    }
    for name, notes in forged.items():
        tenant.apply(a_namespace, _forged_kept_log(name, notes))
    tenant.apply(a_namespace, json.dumps(_evaluated_job()))


def test_a_hostile_tenant_harms_only_its_own_jobs(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, tmp_path: Path
) -> None:
    cluster, b_namespace = process_cluster, process_namespace
    a_namespace = f"{process_namespace}-a"
    cluster.create_namespace(devcluster.process_namespace(a_namespace))
    log_start = operator.log_path.stat().st_size
    try:
        tenant = _tenant(cluster, a_namespace, tmp_path)
        _tenant_a_writes_what_once_harmed_others(tenant, a_namespace)

        # B: a job whose worker fails once, with logs that outlive it by 5 s.
        client = Client(kubeconfig=cluster.kubeconfig, namespace=b_namespace)
        job = client.create(two_attempts_job("steady", tmp_path / "attempted", {"ttlSecondsAfterJobDeleted": 5}))
        done = client.wait(job, "Succeeded", timeout=180)
        assert done.status.restart_count == 1
        wait_for("B's pods let go after cleanup", lambda: not client.pods(job), timeout=60)
        attempts = client.attempts(job, "worker-1")
        assert [(a.number, a.kept, a.exit_code) for a in attempts] == [(1, True, 137), (2, True, 0)]
        client.delete(job)
        wait_for(
            "B's kept logs swept 5 s after its job",
            lambda: not cluster.items("configmaps", b_namespace, "disttrain.io/job-name=steady"),
            timeout=60,
        )

        # A's own: its pods' logs were kept within the spec's bounds; its Evaluator's finite score reached the
        # status and the job succeeded; its forged logs were handled by their bounded notes.
        def noisy_logs() -> list[dict[str, Any]]:
            return tenant.items("configmaps", a_namespace, "disttrain.io/job-name=noisy")

        wait_for("A's logs kept", lambda: len(noisy_logs()) == 2)
        noisy = noisy_logs()
        assert all(0 < len(item["data"]["log"].encode()) <= 256 * 1024 for item in noisy)
        diverged = job_where(tenant, a_namespace, "diverged", "Succeeded", lambda j: holds(j, "Succeeded"))
        assert diverged["status"]["evaluation"]["metrics"] == {"accuracy": 0.5}
        wait_for(
            "the forged logs with a TTL out of bounds or none swept, the far-future one only marked",
            lambda: (
                [item["metadata"]["name"] for item in tenant.items("configmaps", a_namespace, OUTLIVES)]
                == ["far-future"]
            ),
            timeout=60,
        )
        assert operator.running()
        said = operator.log_path.read_bytes()[log_start:].decode(errors="replace")
        assert "Traceback" not in said, said[-4000:]
    finally:
        cluster.kubectl("delete", "namespace", a_namespace, "--wait=false")


def _a_namespace_of_tenant_a(cluster: Cluster, b_namespace: str, folder: Path) -> tuple[str, Cluster]:
    a_namespace = f"{b_namespace}-a"
    cluster.create_namespace(devcluster.process_namespace(a_namespace))
    return a_namespace, _tenant(cluster, a_namespace, folder)


def _padded_kept_log(name: str) -> str:
    """A ConfigMap labelled as a kept log past its job, carrying about a megabyte of labels, as `edit` may."""
    labels = {OUTLIVES: "true", "disttrain.io/job-uid": f"gone-{name}", "disttrain.io/kept-log-of": "worker-0"}
    labels.update({f"pad.example/l{n:04d}": "x" * 63 for n in range(7000)})
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}})


def test_what_a_tenant_writes_at_the_bounds_costs_the_operator_little_memory(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, tmp_path: Path
) -> None:
    """Tenant A submits a suspended ParameterServer job at the spec's bounds (1000 PS and 1000 workers: every
    pod's TF_CONFIG would name 2001 tasks) and 40 kept logs of a megabyte of labels each, which the sweeper
    reads every minute. The operator plans the job (its Suspended condition) and sweeps the logs (marks
    them: their job is gone) without its peak memory coming near its Deployment's 512Mi limit; before,
    the job alone took it to 629 MiB."""
    a_namespace, tenant = _a_namespace_of_tenant_a(process_cluster, process_namespace, tmp_path)
    try:
        for index in range(40):
            tenant.kubectl(
                "apply", "--server-side", "-n", a_namespace, "-f", "-", stdin=_padded_kept_log(f"padded-{index}")
            )
        large = JobBuilder("large").replicas("PS", 1000, {"image": "i"}).replicas("Worker", 1000, {"image": "i"})
        tenant.apply(a_namespace, json.dumps(large.spec(strategy="ParameterServer").run_policy(suspend=True).obj()))
        job_where(tenant, a_namespace, "large", "Suspended", lambda job: holds(job, "Suspended"))
        wait_for(
            "the padded kept logs marked by a sweep",
            lambda: all(
                "disttrain.io/job-gone-since" in (item["metadata"].get("annotations") or {})
                for item in tenant.items("configmaps", a_namespace, OUTLIVES)
            ),
            timeout=120,
        )
        peak = operator.memory_mib()
        assert peak < 384, f"the operator's peak resident memory reached {peak:.0f} MiB"
        assert operator.running()
    finally:
        process_cluster.kubectl("delete", "namespace", a_namespace, "--wait=false")


PADDED_ENV = [{"name": f"PAD_{n:05d}", "value": "x" * 30} for n in range(1500)]  # about 75 KiB


def test_a_tenant_s_jobs_over_the_held_bound_are_held_without_their_templates_and_still_run(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, tmp_path: Path
) -> None:
    """Tenant A submits 10 suspended jobs over the 64 KiB the operator's index holds whole (a Worker with 1,500
    environment variables; 20,000 would be a megabyte, which Python held in about 7 MiB) and a running one
    whose worker checks its last variable: the index holds each without its templates, the reconcile reads a
    job whole to build its pods (the running one succeeds), plans the others, and logs no traceback. Kept
    small: the operator is shared, and its peak is another test's measure."""
    a_namespace, tenant = _a_namespace_of_tenant_a(process_cluster, process_namespace, tmp_path)
    log_start = operator.log_path.stat().st_size
    try:
        for index in range(10):
            padded = JobBuilder(f"padded-{index}").workers(1, {"image": "i", "env": PADDED_ENV})
            tenant.kubectl(
                "create", "-n", a_namespace, "-f", "-", stdin=json.dumps(padded.run_policy(suspend=True).obj())
            )
        runs = JobBuilder("checks-its-env").script("[ ${#PAD_01499} -eq 30 ]", env=PADDED_ENV).obj()
        tenant.kubectl("create", "-n", a_namespace, "-f", "-", stdin=json.dumps(runs))
        job_where(tenant, a_namespace, "checks-its-env", "Succeeded", lambda job: holds(job, "Succeeded"))
        for index in range(10):
            job_where(tenant, a_namespace, f"padded-{index}", "Suspended", lambda job: holds(job, "Suspended"))
        assert operator.running()
        said = operator.log_path.read_bytes()[log_start:].decode(errors="replace")
        assert "Traceback" not in said, said[-4000:]
    finally:
        process_cluster.kubectl("delete", "namespace", a_namespace, "--wait=false")


TRICKLING = r"""
import http.server, json, os, socketserver, time
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"step": 1}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        for byte in body:
            self.wfile.write(bytes([byte])); self.wfile.flush(); time.sleep(1.5)
    def log_message(self, *args): pass
socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer(("", int(os.environ["DISTTRAIN_PROGRESS_PORT"])), Handler).serve_forever()
"""
COUNTING = r"""
import http.server, json, os, socketserver, time
start = time.time()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"step": int((time.time() - start) * 10)}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args): pass
socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer(("", int(os.environ["DISTTRAIN_PROGRESS_PORT"])), Handler).serve_forever()
"""


def _serving(name: str, program: str) -> str:
    return json.dumps(JobBuilder(name).workers(1, {"image": "none", "command": ["python3", "-c", program]}).obj())


def test_a_tenant_s_trickling_progress_ports_do_not_freeze_another_s_progress(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, tmp_path: Path
) -> None:
    """Tenant A's trainers answer each progress poll a byte every 1.5 s; tenant B's reports a new step every
    poll. B's `status.progress.step` moves on at the poll's pace (before, it stayed put while A's answers
    trickled in); B's trainer is closed to other jobs by its NetworkPolicy, which selects its pod."""
    a_namespace, tenant = _a_namespace_of_tenant_a(process_cluster, process_namespace, tmp_path)
    try:
        for index in range(6):
            tenant.apply(a_namespace, _serving(f"slow-{index}", TRICKLING))
        wait_for("A's trainers polled", lambda: len(tenant.items("pods", a_namespace, "disttrain.io/job-name")) == 6)
        process_cluster.apply(process_namespace, _serving("steady", COUNTING))
        steps: set[int] = set()

        def stepped() -> bool:
            job = process_cluster.job(process_namespace, "steady")
            step = ((job.get("status") or {}).get("progress") or {}).get("step")
            if step is not None:
                steps.add(step)
            return len(steps) >= 5

        wait_for("B's step to move on five times", stepped, timeout=60)
        policy = json.loads(
            process_cluster.kubectl("get", "networkpolicy", "steady", "-n", process_namespace, "-o", "json").stdout
        )
        selector = policy["spec"]["podSelector"]
        chosen = ",".join(
            [
                *(f"{k}={v}" for k, v in selector["matchLabels"].items()),
                *(e["key"] for e in selector["matchExpressions"]),
            ]
        )
        assert [pod["metadata"]["name"] for pod in process_cluster.items("pods", process_namespace, chosen)] == [
            "steady-worker-0"
        ]
    finally:
        process_cluster.kubectl("delete", "namespace", a_namespace, "--wait=false")


def test_a_tenant_s_restart_loop_that_costs_it_nothing_backs_off(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, tmp_path: Path
) -> None:
    """Tenant A's trainer exits at once with the preemption code, which backoffLimit does not count: its
    restarts in a row wait longer each time (10 s, then 20 s), and the Restarting condition says so."""
    a_namespace, tenant = _a_namespace_of_tenant_a(process_cluster, process_namespace, tmp_path)
    try:
        tenant.apply(a_namespace, json.dumps(JobBuilder("looping").script("exit 140", 2).obj()))

        def paused() -> dict[str, Any] | None:
            job = tenant.job(a_namespace, "looping")
            backoff = (job.get("status") or {}).get("restartBackoff") or {}
            return job if backoff.get("quickRestarts", 0) >= 2 else None

        job = wait_for("A's third quick restart", paused, timeout=120)
        assert job["status"]["restartCount"] == 0 and job["status"]["disruptions"] >= 3
        restarting = next(c for c in job["status"]["conditions"] if c["type"] == "Restarting")
        assert "3 restarts in a row" in restarting["message"] and "start again in 20 s" in restarting["message"]
    finally:
        process_cluster.kubectl("delete", "namespace", a_namespace, "--wait=false")
