#!/usr/bin/env bash
# Sets up disttrain on a fresh machine and trains for real through Kubernetes: installs the operator,
# the trainer and the development tools, brings up the local control plane (built once from Go
# modules, then cached) with a node that really runs pods, applies the MultiWorkerMirrored digits
# example to the namespace `quickstart`, waits for Succeeded, and shows the progress, the logs, the
# checkpoints and the exported model.
#
# The node, chosen here and said:
#   real node    where this machine can run one and build it (root, a Docker engine, Debian's CNI plugins,
#                iptables and conntrack; gcc, pkg-config, libseccomp and debootstrap the first time): a
#                kubelet and containerd running the images built here (`disttrain_dev.images`), with
#                the operator installed in the cluster from overlays/local-images, as users install it.
#   process node otherwise (root only): pods run as processes of this machine, and the operator runs
#                here too, in the background until `disttrain dev-cluster down` (`disttrain dev-cluster
#                operator`).
# DISTTRAIN_QUICKSTART_NODE=real|process chooses. Stop everything with `disttrain dev-cluster down`.
#
# It installs into the Python environment that `python3` runs in when that is a virtual environment, and
# otherwise makes `.venv` here (or reuses it) and installs there; its pip, if older than 23.2 (editable installs
# of pyproject packages), is upgraded there first.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python3 -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
  [ -x .venv/bin/python3 ] || python3 -m venv .venv
  # shellcheck disable=SC1091
  source .venv/bin/activate
  echo "installing into $PWD/.venv: activate it to use disttrain afterwards (source .venv/bin/activate)"
fi
if ! python3 -c 'import sys, pip; sys.exit(tuple(map(int, pip.__version__.split(".")[:2])) < (23, 2))'; then
  python3 -m pip install --quiet 'pip>=23.2'
fi
# '.[operator]' before ./devtools: otherwise pip 23.2 looks for devtools' dependency `disttrain` on PyPI.
# The control plane compiles (once; it takes the CPU) while TensorFlow downloads (which mostly waits).
python3 -m pip install --quiet -e ./contract -e '.[operator]' -e ./devtools
python3 -m disttrain_dev.build >/dev/null &
control_plane=$!
python3 -m pip install --quiet -e './trainer_image[tensorflow]'
wait "$control_plane"
node=${DISTTRAIN_QUICKSTART_NODE:-}
if [ -z "$node" ]; then
  why_not=$(python3 -c 'from disttrain_dev.real_node import missing_requirement; print(missing_requirement() or "")')
  if [ -z "$why_not" ]; then node=real; else node=process; echo "no real node here ($why_not)"; fi
fi
echo "quickstart on the $node node"

if [ "$node" = real ]; then
  # The binaries compile (once) while the images' packages download: one waits on the CPU, the other mostly not.
  python3 -m disttrain_dev.node_build >/dev/null &
  binaries=$!
  python3 -m disttrain_dev.images --output /dev/null  # the base from Debian packages, then both Dockerfiles
  wait "$binaries"
fi
disttrain dev-cluster up "--$node-node"
kubeconfig=$(disttrain dev-cluster kubeconfig)
export KUBECONFIG=$kubeconfig
kubectl_bin=$(python3 -c 'from disttrain_dev.versions import cache_paths; print(cache_paths().binary("kubectl"))')
kubectl() { "$kubectl_bin" "$@"; }

if [ "$node" = real ]; then
  disttrain dev-cluster load disttrain/operator:0.1.0 disttrain/trainer:0.1.0
  disttrain dev-cluster namespace disttrain-system quickstart --node real
  kubectl apply --server-side -k overlays/local-images/ >/dev/null
  kubectl rollout status -n disttrain-system deploy/disttrain-operator --timeout=180s
else
  disttrain dev-cluster namespace quickstart --node process
  disttrain dev-cluster operator  # in the background until `disttrain dev-cluster down`
fi
kubectl label namespace quickstart pod-security.kubernetes.io/enforce=restricted --overwrite >/dev/null

kubectl delete dtj digits-mwms -n quickstart --ignore-not-found --wait=true >/dev/null
kubectl apply -n quickstart -f examples/local-multi-worker-digits.yaml
kubectl wait -n quickstart --for=condition=Running dtj/digits-mwms --timeout=180s
kubectl get pods -n quickstart -o wide
kubectl wait -n quickstart --for=condition=Succeeded dtj/digits-mwms --timeout=600s
kubectl get dtj -n quickstart -o wide
kubectl logs -n quickstart digits-mwms-worker-0 --tail=1

volume=$(kubectl get pvc digits-mwms-checkpoint -n quickstart -o jsonpath='{.spec.volumeName}')
if [ "$node" = real ]; then
  folder=$(kubectl get pv "$volume" -o jsonpath='{.spec.hostPath.path}{.spec.local.path}')
else
  folder=$(dirname "$kubeconfig")/process-node/volumes/$volume
fi
echo "checkpoints and exported model, in the job's volume on this machine ($folder):"
(cd "$folder" && ls -C . export)
echo "KUBECONFIG=$KUBECONFIG"
echo "kubectl of the cluster's version: $kubectl_bin"
