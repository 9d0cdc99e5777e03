#!/usr/bin/env bash
# End to end on a real cluster with a container runtime: builds the operator and trainer images,
# loads them into the cluster's node, installs disttrain with `kubectl apply --server-side -k`
# (overlays/local-images: deploy/ with images that are never pulled), runs the MultiWorkerMirrored
# digits example and waits for Succeeded. Logs and descriptions land in $E2E_ARTIFACTS (default
# ./e2e-artifacts) when anything fails.
#
#   E2E_CLUSTER=kind|minikube|local (default: kind if installed, else minikube, else local as root)
#     local: the development cluster's real node (`disttrain dev-cluster up --real-node`: a kubelet
#     and containerd on this machine); needs root, Docker, Go and the development tools installed
#     (`pip install -e ./contract -e ./devtools -e '.[operator]'`). Its images are built from a base made of
#     Debian packages, so no registry is needed.
#   E2E_KEEP=1 keeps the cluster (local: the operator and the namespace e2e) and the images' e2e tags afterwards.
#
# Exit status 0: passed; 1: failed; 77: skipped (no Docker, or no cluster to run on).
set -euo pipefail
cd "$(dirname "$0")/.."

# A cluster named in E2E_CLUSTER was asked for: what it lacks is a failure, not a reason to skip.
skip() { echo "e2e skipped: $*"; if [ -n "${E2E_CLUSTER:-}" ]; then exit 1; fi; exit 77; }
command -v docker >/dev/null || skip "docker is not installed"
docker info >/dev/null 2>&1 || skip "the Docker daemon does not answer"
cluster=${E2E_CLUSTER:-}
if [ -z "$cluster" ]; then
  if command -v kind >/dev/null; then cluster=kind; elif command -v minikube >/dev/null; then cluster=minikube
  elif [ "$(id -u)" = 0 ] && python -c 'import disttrain_dev' 2>/dev/null; then cluster=local; fi
fi
[ -n "$cluster" ] || skip "neither kind nor minikube is installed, and the local cluster needs root and disttrain-dev"
if [ "$cluster" = local ]; then
  # the development cluster's own kubectl, of its Kubernetes version
  PATH="$(python -c 'from disttrain_dev.versions import cache_paths; print(cache_paths().bin)'):$PATH"
fi
command -v kubectl >/dev/null || skip "kubectl is not installed"

tag=e2e-$(git rev-parse --short HEAD 2>/dev/null || echo local)
name=disttrain-e2e
artifacts=${E2E_ARTIFACTS:-$PWD/e2e-artifacts}
work=$(mktemp -d)
cleanup() {
  if [ "${E2E_KEEP:-0}" != 1 ]; then
    case $cluster in
      kind) kind delete cluster --name "$name" >/dev/null 2>&1 || true ;;
      minikube) minikube delete -p "$name" >/dev/null 2>&1 || true ;;
      # the development cluster is shared: take back what this run added to it
      local) kubectl delete namespace e2e disttrain-system --ignore-not-found --wait=true >/dev/null 2>&1 || true ;;
    esac
    # the run's own names for the images: each run's would otherwise keep an image of every commit tested
    docker rmi "disttrain/operator:$tag" "disttrain/trainer:$tag" >/dev/null 2>&1 || true
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

if [ "$cluster" = local ]; then
  # FROM python:...-slim cannot be pulled without a registry: the same Dockerfiles on a Debian-made base
  # the images built are read from a file of the tool's: what the builds print never reaches it
  python -m disttrain_dev.images --output "$work/images"
  while read -r image built; do docker tag "$built" "$image:$tag"; done <"$work/images"
else
  docker build -t "disttrain/operator:$tag" .
  docker build -f trainer_image/Dockerfile -t "disttrain/trainer:$tag" .
fi

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
  local)
    disttrain dev-cluster up --real-node
    KUBECONFIG=$(disttrain dev-cluster kubeconfig)
    export KUBECONFIG
    disttrain dev-cluster load "disttrain/operator:$tag" "disttrain/trainer:$tag"
    # pods of these namespaces run on the real node (the fake GPU nodes take the rest)
    disttrain dev-cluster namespace disttrain-system e2e
    ;;
esac

# kustomize takes no absolute paths: the overlay, relative to the temporary folder
overlay=$(python3 -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$PWD/overlays/local-images" "$work")
cat >"$work/kustomization.yaml" <<KUSTOMIZE
resources: [$overlay]
images:
- {name: disttrain/operator, newTag: "$tag"}
KUSTOMIZE
kubectl apply --server-side -k "$work"
kubectl rollout status -n disttrain-system deploy/disttrain-operator --timeout=180s

kubectl create namespace e2e --dry-run=client -o yaml | kubectl apply --server-side -f -
kubectl label namespace e2e pod-security.kubernetes.io/enforce=restricted --overwrite
sed "s|image: disttrain/trainer:0.1.0|image: disttrain/trainer:$tag|" examples/local-multi-worker-digits.yaml \
  | kubectl apply -n e2e -f -
kubectl wait -n e2e --for=condition=Succeeded dtj/digits-mwms --timeout=900s
kubectl get dtj -n e2e -o wide
kubectl logs -n e2e digits-mwms-worker-0 --tail=2
echo "e2e passed on $cluster"
