"""Jobs for the tests, built a step at a time as JobSet's tests build theirs (`MakeJobSet(...).Obj()`):
`JobBuilder("demo").workers(2).run_policy(backoffLimit=0).obj()` is the manifest, `.job()` the parsed
job; each test says only what matters to it. Also the pod views of the core's unit tests, and jobs
whose workers run a shell script, which the process node runs for real."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from disttrain_core.api import yaml_io
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.parsing import parse_job
from disttrain_core.api.spec import ReplicaType
from disttrain_core.observed import PodPhase, PodView
from support.repository import ROOT

T0 = datetime(2026, 1, 1, tzinfo=UTC)
EXAMPLES = ROOT / "examples"
API_VERSION = "disttrain.io/v1alpha1"


class JobBuilder:
    """A DistTrainJob manifest. Replicas run a `tensorflow` container of image `i` unless told otherwise."""

    def __init__(self, name: str = "job", namespace: str | None = None) -> None:
        self._metadata: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
        self._spec: dict[str, Any] = {"replicaSpecs": {}}
        self._status: dict[str, Any] | None = None

    @classmethod
    def from_example(cls, example: str | Path) -> JobBuilder:
        """A job of examples/ (`example` names a file there, or is a path) as written, to change a step at a time."""
        path = example if isinstance(example, Path) else EXAMPLES / example
        manifest = yaml_io.load_all(path.read_text())[0]
        builder = cls()
        builder._metadata = copy.deepcopy(manifest["metadata"])
        builder._spec = copy.deepcopy(manifest["spec"])
        return builder

    def replicas(
        self,
        kind: str,
        count: int,
        container: dict[str, Any] | None = None,
        *,
        pod: dict[str, Any] | None = None,
        **replica: Any,
    ) -> JobBuilder:
        """`count` replicas of `kind` (Chief, Worker, PS, Evaluator); `container` adds to or overrides the
        TensorFlow container's fields, `pod` the pod spec's (securityContext, ...), `replica` the replica
        spec's (restartPolicy, ...)."""
        tensorflow = {"name": "tensorflow", "image": "i", **(container or {})}
        template = {"spec": {**copy.deepcopy(pod or {}), "containers": [tensorflow]}}
        self._spec["replicaSpecs"][kind] = {"replicas": count, **replica, "template": template}
        return self

    def workers(
        self, count: int, container: dict[str, Any] | None = None, *, pod: dict[str, Any] | None = None, **replica: Any
    ) -> JobBuilder:
        return self.replicas("Worker", count, container, pod=pod, **replica)

    def script(
        self, script: str, replicas: int = 1, env: list[dict[str, str]] | None = None, **replica: Any
    ) -> JobBuilder:
        """Workers that run `script` with sh, which the process node runs as a process."""
        container = {"image": "none", "command": ["sh", "-c", script], **({"env": env} if env else {})}
        return self.workers(replicas, container, **replica)

    def replica(self, kind: str, **fields: Any) -> JobBuilder:
        """Changes the replica spec of `kind` (replicas, restartPolicy, ...)."""
        self._spec["replicaSpecs"][kind].update(copy.deepcopy(fields))
        return self

    def container(self, kind: str | None = None, **fields: Any) -> JobBuilder:
        """Changes the TensorFlow container of the replicas of `kind`, or of every replica."""
        for name, replica in self._spec["replicaSpecs"].items():
            if kind in (None, name):
                replica["template"]["spec"]["containers"][0].update(copy.deepcopy(fields))
        return self

    def pod_spec(self, kind: str | None = None, **fields: Any) -> JobBuilder:
        """Changes the pod spec of the replicas of `kind`, or of every replica."""
        for name, replica in self._spec["replicaSpecs"].items():
            if kind in (None, name):
                replica["template"]["spec"].update(copy.deepcopy(fields))
        return self

    def without(self, *fields: str) -> JobBuilder:
        """Removes fields of the spec (an example's `checkpoint`, ...)."""
        for field in fields:
            self._spec.pop(field, None)
        return self

    def strategy(self, strategy: str) -> JobBuilder:
        return self.spec(strategy=strategy)

    def spec(self, **fields: Any) -> JobBuilder:
        self._spec.update(copy.deepcopy(fields))
        return self

    def run_policy(self, **fields: Any) -> JobBuilder:
        self._spec.setdefault("runPolicy", {}).update(copy.deepcopy(fields))
        return self

    def metadata(self, **fields: Any) -> JobBuilder:
        self._metadata.update(copy.deepcopy(fields))
        return self

    def status(self, **fields: Any) -> JobBuilder:
        self._status = {**(self._status or {}), **copy.deepcopy(fields)}
        return self

    def obj(self) -> dict[str, Any]:
        """The manifest, a copy: the builder can go on."""
        manifest = {"apiVersion": API_VERSION, "kind": "DistTrainJob", "metadata": self._metadata, "spec": self._spec}
        if self._status is not None:
            manifest["status"] = self._status
        return copy.deepcopy(manifest)

    def tfjob(self) -> dict[str, Any]:
        """The same job as a Kubeflow TFJob manifest: `tfReplicaSpecs` for `replicaSpecs`, the rest as it is."""
        manifest = self.obj()
        spec = manifest["spec"]
        spec["tfReplicaSpecs"] = spec.pop("replicaSpecs")
        return {**manifest, "apiVersion": "kubeflow.org/v1", "kind": "TFJob"}

    def job(self) -> DistTrainJob:
        """The job as the API server would take it (the CRD's defaults and rules applied), with its status."""
        return parse_job(self.obj())

    def model(self) -> DistTrainJob:
        """The job as the models read it, without the CRD's defaults or rules: as a client reads what the API
        server returns."""
        return DistTrainJob.model_validate(self.obj())

    def counts(self, counts: dict[str, int], **replica: Any) -> JobBuilder:
        """Replicas of each kind in `counts`, each with the same replica fields; ParameterServer when one is a
        PS, else MultiWorkerMirrored."""
        for kind, count in counts.items():
            self.replicas(kind, count, **replica)
        return self.strategy("ParameterServer" if "PS" in counts else "MultiWorkerMirrored")


def make_job(counts: dict[str, int], **spec: Any) -> DistTrainJob:
    """A job named `job` (generation 3) with these replica counts; ParameterServer when it has a PS."""
    return JobBuilder().metadata(generation=3).counts(counts).spec(**spec).job()


def make_pod(kind: ReplicaType, index: int, phase: PodPhase, *, job: str = "job", **fields: Any) -> PodView:
    """A task of the job named `job` (`make_job`'s by default)."""
    name = f"{job}-{kind.task_type}-{index}"
    fields = {"name": name, "uid": f"uid-{name}", **fields}
    return PodView(replica_type=kind, index=index, phase=phase, **fields)


def running_pods(kind: ReplicaType, count: int) -> list[PodView]:
    return [make_pod(kind, index, PodPhase.RUNNING, ready=True) for index in range(count)]


# worker-1's first attempt fails (137, retried); the whole job restarts, so worker-0's first attempt is
# deleted while it runs and says so on SIGTERM; both succeed the second time.
# The job succeeds with worker 0: its second attempt waits (30 s at most) until every peer's second attempt ran,
# or a fast node could end the job, and remove its pods, before a peer's second attempt started.
TWO_ATTEMPTS = """
marker="$MARKER-$HOSTNAME"
if [ -e "$marker" ]; then
  echo "$HOSTNAME second attempt"; touch "$marker-again"
  case "$HOSTNAME" in
    *worker-0) for _ in $(seq 1 300); do
        [ "$(ls "$MARKER"-*-again 2>/dev/null | wc -l)" -ge "$WORKERS" ] && break; sleep 0.1
      done ;;
  esac
  exit 0
fi
touch "$marker"; echo "$HOSTNAME first attempt"
case "$HOSTNAME" in
  *worker-1) sleep 2; echo "$HOSTNAME fails"; exit 137 ;;
  *) trap 'echo "$HOSTNAME stopped"; exit 143' TERM; while true; do sleep 0.2; done ;;
esac
"""


def two_attempts_job(name: str, marker: Path, logs: dict[str, Any], workers: int = 2) -> dict[str, Any]:
    """Workers that each run twice (TWO_ATTEMPTS), their pods removed once the job ends."""
    env = [{"name": "MARKER", "value": str(marker)}, {"name": "WORKERS", "value": str(workers)}]
    builder = JobBuilder(name).script(TWO_ATTEMPTS, workers, env, restartPolicy="ExitCode")
    return builder.run_policy(cleanPodPolicy="All").spec(logs=logs).obj()
