"""Kueue, built from its source tarball (the module proxy does not serve its module), cached, and run as
a host process against the local cluster, so the integration suite proves the Workload path with the
real thing.

The tarball holds what `cmd/kueue` needs, vendored modules included. Run as a host process it needs
no webhook on any request's path: with `internalCertManagement.enable: false` it reads a serving pair
from the folders below (nothing connects to them) and, without a webhook configuration, the API
server calls none. Its visibility server wants an in-cluster config, so that gate is off.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from disttrain_dev.build import ensure_built, run_go
from disttrain_dev.pki import write_serving_pair
from disttrain_dev.third_party import SourceTarball

SOURCE = SourceTarball("kueue-ff69552e79-src.tar.gz", "DISTTRAIN_KUEUE_SOURCE")
CRD_FOLDER = "config/components/crd/bases"
WEBHOOK_CERTS = Path("/tmp/k8s-webhook-server/serving-certs")
METRICS_CERTS = Path("/etc/kueue/metrics/certs")
NAMESPACE = "kueue-system"
# DistTrainJobs, and TFJobs where the operator serves them: Kueue leaves both kinds' jobs to it.
EXTERNAL_FRAMEWORKS = ["DistTrainJob.v1alpha1.disttrain.io", "TFJob.v1.kubeflow.org"]
# What MultiKueue dispatches through its generic adapter, which reads `.spec.managedBy`.
MULTIKUEUE_FRAMEWORKS = ["DistTrainJob.v1alpha1.disttrain.io"]
TFJOB_INTEGRATION = "kubeflow.org/tfjob"  # Kueue's own, with MultiKueue's adapter for `.spec.runPolicy.managedBy`


@dataclass(frozen=True)
class KueueBuild:
    root: Path

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "kueue"

    @property
    def crds(self) -> Path:
        return self.root / "crds"

    def missing(self) -> list[str]:
        return [name for name, path in (("kueue", self.binary), ("crds", self.crds)) if not path.exists()]


def kueue_build() -> KueueBuild:
    """The cache folder, keyed by the tarball's name (which names Kueue's commit)."""
    return KueueBuild(SOURCE.cache())


def missing_source() -> str | None:
    """Why Kueue cannot be built here, or None."""
    if not kueue_build().missing():
        return None
    return SOURCE.unavailable(("go",))


def ensure_kueue() -> KueueBuild:
    """Build the binary and keep the CRDs, once; a warm cache returns at once."""
    build = kueue_build()
    ensure_built(build.root, build.missing, lambda _: _build(build))
    return build


def _build(build: KueueBuild) -> None:
    problem = missing_source()
    if problem:
        raise RuntimeError(problem)
    source = SOURCE.extract(build.root / "src")
    (build.root / "bin").mkdir(exist_ok=True)
    run_go(["build", "-mod=vendor", "-trimpath", "-ldflags=-s -w", "-o", str(build.binary), "./cmd/kueue"], source)
    shutil.rmtree(build.crds, ignore_errors=True)
    shutil.copytree(source / CRD_FOLDER, build.crds)
    shutil.rmtree(source)


def configuration(
    health_port: int, metrics_port: int, webhook_port: int, *, multikueue: bool = False, tfjob_integration: bool = False
) -> str:
    """Kueue's configuration: DistTrainJobs and TFJobs as external frameworks, no leader election, local ports;
    `multikueue`: a manager cluster's, whose MultiKueue dispatches DistTrainJobs to worker clusters;
    `tfjob_integration`: TFJobs queued by Kueue's own TFJob integration instead (MultiKueue's TFJob adapter
    comes with it), the operator only running them (`DISTTRAIN_KUEUE_TFJOB_INTEGRATION`)."""
    config: dict[str, object] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "webhook": {"port": webhook_port, "host": "127.0.0.1"},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "integrations": {"frameworks": [], "externalFrameworks": EXTERNAL_FRAMEWORKS},
    }
    if tfjob_integration:
        config["integrations"] = {"frameworks": [TFJOB_INTEGRATION], "externalFrameworks": MULTIKUEUE_FRAMEWORKS}
    if multikueue:
        config["multiKueue"] = {"externalFrameworks": [{"name": name} for name in MULTIKUEUE_FRAMEWORKS]}
    return json.dumps(config, indent=1)


def write_certificates() -> None:
    """Self-signed serving pairs where its webhook and metrics servers look; nothing connects to them."""
    for folder in (WEBHOOK_CERTS, METRICS_CERTS):
        write_serving_pair(folder, "kueue")


if __name__ == "__main__":
    print(ensure_kueue().root)
