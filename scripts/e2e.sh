#!/usr/bin/env bash
# End to end on a real cluster with a container runtime: builds the operator and trainer images,
# loads them into kind (or minikube), installs disttrain with `kubectl apply -k deploy/`, runs the
# MultiWorkerMirrored digits example and waits for Succeeded. Logs and descriptions land in
# $E2E_ARTIFACTS (default ./e2e-artifacts) when anything fails.
#
#   E2E_CLUSTER=kind|minikube (default: kind if installed, else minikube)
#   E2E_KEEP=1 keeps the cluster afterwards.
#
# Exit status 0: passed; 1: failed; 77: skipped (no Docker, or neither kind nor minikube).
set -euo pipefail
cd "$(dirname "$0")/.."

skip() { echo "e2e skipped: $*"; exit 77; }
command -v docker >/dev/null || skip "docker is not installed"
docker info >/dev/null 2>&1 || skip "the Docker daemon does not answer"
command -v kubectl >/dev/null || skip "kubectl is not installed"
cluster=${E2E_CLUSTER:-}
if [ -z "$cluster" ]; then
  if command -v kind >/dev/null; then cluster=kind; elif command -v minikube >/dev/null; then cluster=minikube; fi
fi
[ -n "$cluster" ] || skip "neither kind nor minikube is installed"

tag=e2e-$(git rev-parse --short HEAD 2>/dev/null || echo local)
name=disttrain-e2e
artifacts=${E2E_ARTIFACTS:-$PWD/e2e-artifacts}
work=$(mktemp -d)
cleanup() {
  if [ "${E2E_KEEP:-0}" != 1 ]; then
    case $cluster in
      kind) kind delete cluster --name "$name" >/dev/null 2>&1 || true ;;
      minikube) minikube delete -p "$name" >/dev/null 2>&1 || true ;;
    esac
  fi
  rm -rf "$work"
}
collect() {
  mkdir -p "$artifacts"
  kubectl get all,dtj,pvc,events -A -o wide >"$artifacts/cluster.txt" 2>&1 || true
  kubectl describe dtj -n e2e >"$artifacts/jobs.txt" 2>&1 || true
  kubectl logs -n disttrain-system deploy/disttrain-operator --tail=-1 >"$artifacts/operator.log" 2>&1 || true
  for pod in $(kubectl get pods -n e2e -o name 2>/dev/null); do
    kubectl logs -n e2e "$pod" --all-containers >"$artifacts/$(basename "$pod").log" 2>&1 || true
  done
  echo "e2e failed: logs in $artifacts"
}
trap cleanup EXIT
trap 'collect' ERR

docker build -t "disttrain/operator:$tag" .
docker build -f trainer_image/Dockerfile -t "disttrain/trainer:$tag" .

case $cluster in
  kind)
    kind get clusters | grep -qx "$name" || kind create cluster --name "$name" --wait 120s
    kind load docker-image --name "$name" "disttrain/operator:$tag" "disttrain/trainer:$tag"
    kubectl config use-context "kind-$name"
    ;;
  minikube)
    minikube status -p "$name" >/dev/null 2>&1 || minikube start -p "$name" --wait=all
    minikube image load -p "$name" "disttrain/operator:$tag"
    minikube image load -p "$name" "disttrain/trainer:$tag"
    kubectl config use-context "$name"
    ;;
esac

cat >"$work/kustomization.yaml" <<KUSTOMIZE
resources: [$PWD/deploy]
images:
- {name: disttrain/operator, newTag: "$tag"}
KUSTOMIZE
kubectl apply --server-side -k "$work"
kubectl rollout status -n disttrain-system deploy/disttrain-operator --timeout=180s

kubectl create namespace e2e --dry-run=client -o yaml | kubectl apply -f -
sed "s|image: disttrain/trainer:0.1.0|image: disttrain/trainer:$tag|" examples/local-multi-worker-digits.yaml \
  | kubectl apply -n e2e -f -
kubectl wait -n e2e --for=condition=Succeeded dtj/digits-mwms --timeout=900s
kubectl get dtj -n e2e -o wide
echo "e2e passed on $cluster"
