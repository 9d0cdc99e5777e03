"""Submit a job from Python, follow its log, wait for it and read what it reports.

    python examples/client.py examples/local-multi-worker-digits.yaml --namespace quickstart

Needs only the base distribution (`pip install ./contract .`: neither kopf nor TensorFlow) and a
kubeconfig, found as kubectl finds it. The job is deleted at the end unless --keep is given.
"""

from __future__ import annotations

import argparse
import sys

from disttrain import Client, DisttrainError


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("manifest", help="a DistTrainJob (or TFJob) manifest file")
    parser.add_argument("--namespace", help="default: the kubeconfig context's namespace")
    parser.add_argument("--keep", action="store_true", help="leave the job in the cluster")
    args = parser.parse_args()

    client = Client(namespace=args.namespace)
    job = client.create(args.manifest)
    print(f"created {job.kind} {job.metadata.namespace}/{job.metadata.name}")
    try:
        for line in client.logs(job, follow=True):  # waits while Pending, goes on through restarts
            print(f"| {line}")
        done = client.wait(job, "Succeeded", timeout=600)
        progress = done.status.progress
        print(f"{done.metadata.name}: {done.status.phase}, step {progress.step if progress else '-'}")
        for event in client.events(done):
            print(f"  {event.type:7} {event.reason:12} {event.object}: {event.message}")
    except DisttrainError as error:  # JobFailedError carries the job's own message
        print(f"error: {error}", file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            client.delete(job)
    return 0


if __name__ == "__main__":
    sys.exit(main())
