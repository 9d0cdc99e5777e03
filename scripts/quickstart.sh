#!/usr/bin/env bash
# Sets up disttrain on a fresh machine and trains for real through Kubernetes, with no Docker:
# installs the operator, the trainer and the development tools, brings up the local control plane (built once from Go
# modules, then cached) with its process node, starts the operator, applies the MultiWorkerMirrored
# digits example to the namespace `local` (whose pods run as processes on this machine), waits for
# Succeeded, and shows the progress, the checkpoints and the exported model.
#
# Needs root for the process node (a network namespace per pod). Stop everything with
# `disttrain dev-cluster down`.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet -e ./contract -e ./trainer_image -e ./devtools -e '.[trainer]'
kubeconfig=$(disttrain dev-cluster up --process-node | tail -n 1)
export KUBECONFIG=$kubeconfig
kubectl_bin=$(python3 -c 'from disttrain_dev.versions import cache_paths; print(cache_paths().binary("kubectl"))')
kubectl() { "$kubectl_bin" "$@"; }

log=${TMPDIR:-/tmp}/disttrain-operator.log
disttrain operator --all-namespaces --liveness=http://127.0.0.1:18080/healthz >"$log" 2>&1 &
operator_pid=$!
trap 'kill $operator_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 60); do
  curl -fs http://127.0.0.1:18080/healthz >/dev/null 2>&1 && break
  sleep 1
done

kubectl delete dtj digits-mwms -n local --ignore-not-found --wait=true >/dev/null
kubectl apply -n local -f examples/local-multi-worker-digits.yaml
kubectl wait -n local --for=condition=Running dtj/digits-mwms --timeout=180s
kubectl get pods -n local -o wide
kubectl wait -n local --for=condition=Succeeded dtj/digits-mwms --timeout=600s
kubectl get dtj -n local -o wide

state=$(dirname "$kubeconfig")/process-node
volume=$(kubectl get pvc digits-mwms-checkpoint -n local -o jsonpath='{.spec.volumeName}')
echo "checkpoints and exported model, in the job's volume on this machine ($state/volumes/$volume):"
ls "$state/volumes/$volume" "$state/volumes/$volume/export"
echo "pod logs: $state/pods/; operator log: $log; KUBECONFIG=$KUBECONFIG"
