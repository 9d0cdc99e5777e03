"""The pod that reads a replica's logs kept on the checkpoint volume (`logs.destination: CheckpointVolume`)
for the client: nothing but a pod can read a claim. It runs the job's own TensorFlow image (which has
Python, and can read what the job's pods wrote) with the claim read-only, prints one JSON line per
attempt file, `{"file", "modified", "text"}`, and ends. It carries no job-name label, so the operator
does not take it for one of the job's pods; it is owned by the job and ends within `DEADLINE_SECONDS`."""

from __future__ import annotations

from disttrain_contract.volume_logs import LOG_SUFFIX
from disttrain_operator.api.job import GROUP, DistTrainJob
from disttrain_operator.core.builders import volume_readers
from disttrain_operator.core.builders.log_keeping import volume_log_dir
from disttrain_operator.core.builders.objects import owner_references
from disttrain_operator.core.types import Manifest

READER_OF_LABEL = f"{GROUP}/log-reader-of"
DEADLINE_SECONDS = 300
RESOURCES: Manifest = {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "256Mi"}}
SCRIPT = f"""
import json, os, sys
folder = sys.argv[1]
names = sorted(n for n in os.listdir(folder) if n.endswith({LOG_SUFFIX!r})) if os.path.isdir(folder) else []
for name in names:
    path = os.path.join(folder, name)
    with open(path, "rb") as handle:
        text = handle.read().decode("utf-8", "replace")
    print(json.dumps({{"file": name, "modified": os.stat(path).st_mtime, "text": text}}), flush=True)
"""


def reader_pod(job: DistTrainJob, replica: str, name: str) -> Manifest:
    """The reader of one replica's (`worker-1`) attempts; the job must keep its logs on the volume."""
    folder = volume_log_dir(job, replica)
    assert folder is not None
    container: Manifest = {
        "name": "read-logs",
        "image": volume_readers.tensorflow_image(job),
        "command": ["python3", "-c", SCRIPT, folder],
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
