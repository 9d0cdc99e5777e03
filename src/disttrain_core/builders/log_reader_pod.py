"""The pod that reads a replica's kept logs back from the checkpoint volume for the client, since nothing but
a pod can read a claim. It runs the job's own TensorFlow image (which has Python, and can read what the
job's pods wrote) with the claim read-only, prints one JSON line per attempt file, `{"file", "number",
"modified"}`, with its `text` for the first attempt and the latest ones (KEPT_ATTEMPTS_PER_REPLICA in all,
as in ConfigMaps), and ends: what it prints stays far below the size at which the kubelet rotates a
container's log (`containerLogMaxSize`, 10Mi by default). It carries no job-name label, so the operator
does not take it for one of the job's pods; it is owned by the job and ends within `DEADLINE_SECONDS`."""

from __future__ import annotations

from disttrain_contract.kept_logs import LOG_SUFFIX
from disttrain_core.api.job import GROUP, DistTrainJob
from disttrain_core.builders import volume_readers
from disttrain_core.builders.objects import owner_references
from disttrain_core.images import TRAINER_IMAGE
from disttrain_core.kept_logs.policy import KEPT_ATTEMPTS_PER_REPLICA
from disttrain_core.kept_logs.volume import volume_log_dir
from disttrain_core.types import Manifest

READER_OF_LABEL = f"{GROUP}/log-reader-of"
DEADLINE_SECONDS = 300
RESOURCES: Manifest = {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "256Mi"}}
SCRIPT = f"""
import json, os, sys
folder, keep = sys.argv[1], int(sys.argv[2])
names = sorted(n for n in os.listdir(folder) if n.endswith({LOG_SUFFIX!r})) if os.path.isdir(folder) else []
shown = names[:1] + names[1:][-(keep - 1):] if keep > 1 else names[:1]
for number, name in enumerate(names, start=1):
    path = os.path.join(folder, name)
    entry = {{"file": name, "number": number, "modified": os.stat(path).st_mtime}}
    if name in shown:
        with open(path, "rb") as handle:
            entry["text"] = handle.read().decode("utf-8", "replace")
    print(json.dumps(entry, ensure_ascii=False), flush=True)
"""


def reader_pod(job: DistTrainJob, replica: str, name: str) -> Manifest:
    """The reader of one replica's (`worker-1`) attempts; the job must keep its logs on the volume. It runs the
    job's trainer image, else this release's (a reader of the job's cannot read which one its install names)."""
    folder = volume_log_dir(job, replica)
    assert folder is not None
    container: Manifest = {
        "name": "read-logs",
        "image": volume_readers.tensorflow_image(job, TRAINER_IMAGE),
        "command": ["python3", "-c", SCRIPT, folder, str(KEPT_ATTEMPTS_PER_REPLICA)],
        "resources": RESOURCES,
        "volumeMounts": [volume_readers.volume_mount(job)],
    }
    metadata: Manifest = {
        "name": name,
        "namespace": job.metadata.namespace,
        "labels": {READER_OF_LABEL: job.metadata.name},
    }
    owners = owner_references(job)
    if owners:
        metadata["ownerReferences"] = [{**owners[0], "controller": False, "blockOwnerDeletion": False}]
    spec = volume_readers.pod_spec(job, container)
    spec.update(restartPolicy="Never", activeDeadlineSeconds=DEADLINE_SECONDS, automountServiceAccountToken=False)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
