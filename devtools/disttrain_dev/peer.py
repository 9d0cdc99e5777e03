"""The peer the benchmarks measure against: Kubeflow's training-operator, built from its Go module.

Two builds of one pinned version, cached like the control plane:
- `training-operator`, as shipped (`go install`; its go.mod has no replace directives);
- `training-operator-unthrottled`, the same source with its client's rate limit lifted.
  controller-runtime caps a client at 20 requests/s (burst 30) unless the rest config says
  otherwise, and the command has no flag for it; the cap, not the controller's work, would be
  measured. The unthrottled build sets QPS -1 (client-go then makes no rate limiter), as the
  operator's Python client has none.

It starts with no webhook on any request's path: its certificate rotator holds the controllers back
until the Secret `training-operator-webhook-cert` exists in `MY_POD_NAMESPACE` and a serving pair
exists where its webhook server looks; with no ValidatingWebhookConfiguration the API server never
calls it (it logs that it found none, and goes on).
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from disttrain_dev.build import ensure_built, go_install, module_dir, run_go
from disttrain_dev.pki import write_serving_pair
from disttrain_dev.versions import cache_root

MODULE = "github.com/kubeflow/training-operator"
VERSION = "v1.8.1"
COMMAND = "cmd/training-operator.v1"
TFJOB_CRD = "manifests/base/crds/kubeflow.org_tfjobs.yaml"
SHIPPED = "training-operator"
UNTHROTTLED = "training-operator-unthrottled"
# Where its webhook server reads its serving pair (controller-runtime's default).
SERVING_CERTS = Path("/tmp/k8s-webhook-server/serving-certs")
WEBHOOK_SECRET = "training-operator-webhook-cert"
CONTROLLER_NAME = "tfjob-controller"  # its controller, and the component of its Events

_MANAGER_CONFIG = "mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{"
_UNTHROTTLED_CONFIG = """restConfig := ctrl.GetConfigOrDie()
	restConfig.QPS = -1 // client-go makes no rate limiter for a negative QPS
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{"""


def unthrottled_main(source: str) -> str:
    """The command's main.go with no client rate limit; an error if the line to change is not there."""
    if source.count(_MANAGER_CONFIG) != 1:
        raise ValueError(f"{COMMAND}/main.go has no single line {_MANAGER_CONFIG!r} to lift the rate limit at")
    return source.replace(_MANAGER_CONFIG, _UNTHROTTLED_CONFIG)


@dataclass(frozen=True)
class PeerBuild:
    root: Path

    def binary(self, name: str) -> Path:
        return self.root / "bin" / name

    @property
    def tfjob_crd(self) -> Path:
        return self.root / "kubeflow.org_tfjobs.yaml"

    def missing(self) -> list[str]:
        wanted = [self.binary(SHIPPED), self.binary(UNTHROTTLED), self.tfjob_crd]
        return [path.name for path in wanted if not path.is_file()]


def peer_build() -> PeerBuild:
    """The cache folder, keyed by the version and by the patch, so changing either rebuilds."""
    digest = hashlib.sha256(f"{VERSION}|{_UNTHROTTLED_CONFIG}".encode()).hexdigest()[:8]
    return PeerBuild(cache_root() / "devcluster" / f"peer-training-operator-{VERSION}-{digest}")


def ensure_peer() -> PeerBuild:
    """Build both binaries and copy the TFJob CRD, once; a warm cache returns at once."""
    build = peer_build()
    ensure_built(build.root, build.missing, lambda _: _build(build))
    return build


def _build(build: PeerBuild) -> None:
    if shutil.which("go") is None:
        raise RuntimeError("Go is needed once to build the peer (training-operator), and none is on PATH")
    bin_dir = build.root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    go_install(f"{MODULE}/{COMMAND}@{VERSION}", bin_dir)
    (bin_dir / Path(COMMAND).name).replace(build.binary(SHIPPED))
    module = module_dir(MODULE, VERSION)
    copy = build.root / "src"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(module, copy, ignore=shutil.ignore_patterns("sdk", "docs", "examples"))
    copy.chmod(0o755)
    for folder in copy.rglob("*"):  # the module cache's files are read-only
        folder.chmod(0o755 if folder.is_dir() else 0o644)
    main = copy / COMMAND / "main.go"
    main.write_text(unthrottled_main(main.read_text()))
    run_go(["build", "-trimpath", "-ldflags=-s -w", "-o", str(build.binary(UNTHROTTLED)), f"./{COMMAND}"], copy)
    shutil.copyfile(module / TFJOB_CRD, build.tfjob_crd)
    shutil.rmtree(copy)


def write_serving_certificates(folder: Path = SERVING_CERTS) -> None:
    """A self-signed serving pair where its webhook server looks; nothing ever connects to it."""
    write_serving_pair(folder, "training-operator")


if __name__ == "__main__":
    print(ensure_peer().root)
