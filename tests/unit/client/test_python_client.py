"""The Python client's own decisions, without a cluster: what a wait settles on, which replica a name means,
how a log stream is cut into lines, which Events are the job's; and that it installs without the operator."""

from __future__ import annotations

import subprocess
import sys
import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from disttrain import Client, DistTrainJob, InvalidJobError, JobFailedError, ReplicaNotFoundError
from disttrain.client import _about_job, _manifest, _reached
from disttrain.job_kinds import readable_jobs, typed_job
from disttrain.logs import LONGEST_LINE, _split, replica_task
from disttrain_core.api.spec import ReplicaType
from disttrain_core.held import PLACEHOLDER_TEMPLATE
from disttrain_kube.api_errors import ResourceExpiredError
from support.job_builder import JobBuilder
from support.repository import ROOT

TEMPLATE = {"spec": {"containers": [{"name": "tensorflow", "image": "trainer"}]}}


STAMP = "2026-01-01T00:00:00Z"


def _condition(kind: str, status: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": "Why", "message": f"{kind} said", "lastTransitionTime": STAMP}


def _job(replicas: dict[str, int], conditions: tuple[tuple[str, str], ...] = ()) -> DistTrainJob:
    builder = JobBuilder("mnist", "team").counts(replicas)
    return builder.status(conditions=[_condition(kind, status) for kind, status in conditions]).model()


def test_a_wait_settles_on_any_wanted_condition_that_is_true_now() -> None:
    resumed = _job({"Worker": 2}, (("Running", "True"), ("Suspended", "False")))
    assert _reached(resumed, {"Running"})
    assert not _reached(_job({"Worker": 2}, (("Running", "False"), ("Suspended", "True"))), {"Running"})
    assert _reached(_job({"Worker": 2}, (("Failed", "True"),)), {"Succeeded", "Failed"})


def test_a_wait_for_success_raises_with_the_jobs_own_message_when_it_fails() -> None:
    failed = _job({"Worker": 2}, (("Running", "False"), ("Failed", "True")))
    with pytest.raises(JobFailedError, match="DistTrainJob team/mnist failed: Why: Failed said") as raised:
        _reached(failed, {"Succeeded"})
    assert raised.value.job is failed


@pytest.mark.parametrize(
    ("name", "task"),
    [
        ("worker-1", (ReplicaType.WORKER, 1)),
        ("Worker-0", (ReplicaType.WORKER, 0)),
        ("chief", (ReplicaType.CHIEF, 0)),
        (None, (ReplicaType.CHIEF, 0)),
    ],
)
def test_a_replica_is_named_as_its_pod_is(name: str | None, task: tuple[ReplicaType, int]) -> None:
    assert replica_task(_job({"Chief": 1, "Worker": 2}), name) == task


def test_without_a_chief_worker_0_reports_and_is_the_default() -> None:
    assert replica_task(_job({"Worker": 2}), None) == (ReplicaType.WORKER, 0)


@pytest.mark.parametrize("name", ["worker-2", "ps-0", "trainer", "worker-x", "worker--1"])
def test_a_replica_that_does_not_exist_names_those_that_do(name: str) -> None:
    with pytest.raises(ReplicaNotFoundError, match=r"has no replica .*; it has chief-0, worker-0, worker-1$"):
        replica_task(_job({"Chief": 1, "Worker": 2}), name)


def test_a_log_is_cut_into_lines_with_their_timestamps_made_comparable() -> None:
    chunks = [b"2026-11-25T08:30:00.1Z first\n2026-11-25T08:30:00.12", b"Z second\nno stamp here\ntail"]
    lines = list(_split(iter(chunks)))
    assert [text for _, text in lines] == ["first", "second", "no stamp here", "tail"]
    first, second = lines[0][0], lines[1][0]
    assert first == b"2026-11-25T08:30:00.100000000" and first < second  # the kubelet trims trailing zeros
    assert lines[2][0] == lines[3][0] == b""


def test_a_line_longer_than_the_bound_is_handed_on_in_pieces() -> None:
    chunks = [b"x" * (LONGEST_LINE // 2)] * 5 + [b"\n"]
    assert [len(text) for _, text in _split(iter(chunks))] == [LONGEST_LINE, LONGEST_LINE, LONGEST_LINE // 2]


def test_the_jobs_events_are_its_own_and_its_childrens() -> None:
    assert _about_job({"kind": "DistTrainJob", "name": "mnist"}, "DistTrainJob", "mnist")
    assert _about_job({"kind": "Pod", "name": "mnist-worker-0"}, "DistTrainJob", "mnist")
    assert _about_job({"kind": "PersistentVolumeClaim", "name": "mnist-checkpoint"}, "DistTrainJob", "mnist")
    assert not _about_job({"kind": "DistTrainJob", "name": "mnist-2"}, "DistTrainJob", "mnist")
    assert not _about_job({"kind": "TFJob", "name": "mnist"}, "DistTrainJob", "mnist")
    assert not _about_job({"kind": "Pod", "name": "mnistx-worker-0"}, "DistTrainJob", "mnist")
    assert _about_job({"kind": "Deployment", "name": "mnist-tensorboard"}, "DistTrainJob", "mnist")
    for namesake in ("mnist-v2-worker-0", "mnist-v2", "mnist-v2-checkpoint", "mnist-worker-x", "mnist-worker-\u0661"):
        for kind in ("Pod", "Service", "PersistentVolumeClaim"):
            assert not _about_job({"kind": kind, "name": namesake}, "DistTrainJob", "mnist"), (kind, namesake)


def test_a_manifest_comes_from_a_file_a_dict_or_a_model(tmp_path: Path) -> None:
    example = ROOT / "examples" / "multi-worker-mirrored-gpu.yaml"
    from_file = _manifest(example)
    assert from_file["kind"] == "DistTrainJob"
    model = DistTrainJob.model_validate(from_file)
    from_model = _manifest(model)
    assert "status" not in from_model and from_model["spec"]["replicaSpecs"]["Worker"]["replicas"] == 4
    assert _manifest({"kind": "TFJob"}) == {"kind": "TFJob"}
    two = tmp_path / "two.yaml"
    two.write_text("kind: A\n---\nkind: B\n")
    with pytest.raises(InvalidJobError, match="expected one job manifest, found 2 documents"):
        _manifest(two)
    with pytest.raises(InvalidJobError, match="no such file"):
        _manifest(tmp_path / "missing.yaml")


def _kubeconfig(path: Path, namespace: str | None) -> Path:
    context: dict[str, Any] = {"cluster": "local", "user": "me"}
    if namespace:
        context["namespace"] = namespace
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "me", "user": {"token": "t"}}],
        "contexts": [{"name": "here", "context": context}, {"name": "other", "context": {**context, "namespace": "b"}}],
        "current-context": "here",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_namespace_comes_from_the_call_then_the_client_then_the_context(tmp_path: Path) -> None:
    kubeconfig = _kubeconfig(tmp_path / "config", "research")
    assert Client(kubeconfig=kubeconfig).namespace == "research"
    assert Client(kubeconfig=kubeconfig, context="other").namespace == "b"
    assert Client(kubeconfig=kubeconfig, namespace="mine").namespace == "mine"
    assert Client(kubeconfig=_kubeconfig(tmp_path / "bare", None)).namespace == "default"


def test_the_client_installs_and_runs_without_kopf_or_tensorflow(tmp_path: Path) -> None:
    """What a notebook gets from the base distribution: the base dependencies carry neither, and the client
    imports and connects with them unimportable."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {requirement.split(">")[0].split("=")[0].strip().lower() for requirement in project["dependencies"]}
    assert not names & {"kopf", "tensorflow", "prometheus-client", "pydantic-settings"}
    assert "kopf>=1.44.6" in project["optional-dependencies"]["operator"]
    kubeconfig = _kubeconfig(tmp_path / "config", "research")
    script = (
        "import sys\n"
        "for name in ('kopf', 'tensorflow', 'prometheus_client', 'pydantic_settings', 'disttrain_trainer'):\n"
        "    sys.modules[name] = None\n"
        "from disttrain import Client\n"
        f"print(Client(kubeconfig={str(kubeconfig)!r}).namespace)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert (result.returncode, result.stdout) == (0, "research\n"), result.stderr
    operator = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['kopf'] = None\n" + _OPERATOR_WITHOUT_KOPF],
        capture_output=True,
        text=True,
        check=False,
    )
    assert operator.returncode == 1 and "pip install -e ./contract -e '.[operator]' in a checkout" in operator.stderr


_OPERATOR_WITHOUT_KOPF = "from disttrain_cli.main import main; sys.exit(main(['operator']))"


def _tfjob(name: str, **run_policy: Any) -> dict[str, Any]:
    return JobBuilder(name, "team").workers(1).run_policy(**run_policy).tfjob()


def test_a_tfjob_that_cannot_be_converted_hides_only_itself(caplog: pytest.LogCaptureFixture) -> None:
    bodies = [_tfjob("first"), _tfjob("dynamic"), _tfjob("last")]
    bodies[1]["spec"]["enableDynamicWorker"] = True
    with pytest.raises(InvalidJobError):
        typed_job(bodies[1])
    assert [job.metadata.name for job in readable_jobs(bodies)] == ["first", "last"]
    assert "TFJob dynamic" in caplog.text


class _PagedJobs:
    """A Kube that lists jobs a page at a time and whose watches expire at once: the first listing has `first`,
    every later one `later`."""

    def __init__(self, first: list[dict[str, Any]], later: list[dict[str, Any]]) -> None:
        self.listings = [first, later]
        self.queries: list[dict[str, str]] = []
        self.resources = self

    def collection(self, api_version: str, kind: str, *, every_namespace: bool) -> str:
        return f"/apis/{api_version}/namespaces/{{namespace}}/{kind.lower()}s"

    def json_request(self, method: str, path: str, params: dict[str, str], *, query: dict[str, str]) -> dict[str, Any]:
        self.queries.append(query)
        items = self.listings[0]
        start = int(query.get("continue", "0"))
        page = items[start : start + int(query["limit"])]
        left = start + len(page) < len(items)
        if not left and len(self.listings) > 1:
            self.listings.pop(0)
        metadata = {"resourceVersion": "7", **({"continue": str(start + len(page))} if left else {})}
        return {"items": page, "metadata": metadata}

    def stream_lines(
        self, path: str, query: dict[str, str], read_timeout: float, params: dict[str, str]
    ) -> list[bytes]:
        raise ResourceExpiredError(410, "too old")


def test_a_watch_lists_a_page_at_a_time_and_remembers_a_large_job_without_its_templates() -> None:
    padding = [{"name": f"PAD_{n}", "value": "x" * 60} for n in range(1200)]  # about 90 KiB
    large = JobBuilder("large", "team").counts({"Worker": 1}).container(env=padding).obj()
    jobs = [JobBuilder(f"small-{n}", "team").counts({"Worker": 1}).obj() for n in range(14)] + [large]
    kube = _PagedJobs(jobs, jobs[:14])
    watcher = Client(api_client=object())  # type: ignore[arg-type]
    watcher._kube = kube  # type: ignore[assignment]
    gate = threading.Lock()  # what a process of many watches shares: one page parsed at a time
    events = watcher.watch(namespace="team", listing_gate=gate)
    first = [next(events) for _ in jobs]
    assert gate.locked()  # the last page's jobs are still being given
    assert [event.type for event in first] == ["ADDED"] * 15
    assert [query.get("continue") for query in kube.queries] == [None, "10"]
    assert {query["limit"] for query in kube.queries} == {"10"}
    assert first[-1].job.spec.replica_specs[ReplicaType.WORKER].template["spec"]["containers"][0]["env"] == padding
    again = [next(events) for _ in range(15)]  # listed again after the watch ended: the large job went meanwhile
    assert [event.type for event in again] == ["ADDED"] * 14 + ["DELETED"]
    gone = again[-1].job
    assert (
        gone.metadata.name == "large" and gone.spec.replica_specs[ReplicaType.WORKER].template == PLACEHOLDER_TEMPLATE
    )
