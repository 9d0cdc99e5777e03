#!/usr/bin/env bash
# Sets up disttrain on a fresh machine and runs the MultiWorkerMirrored example end to end:
# installs the package, brings up the local control plane (built once from Go modules, then cached),
# starts the operator, applies the example and follows it to Succeeded.
#
# The local cluster's nodes are kwok's fake GPU nodes: pods are scheduled and reported Running, but
# no container runs. This script plays the trainer's part by marking worker 0 Succeeded.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet -e .
kubeconfig=$(disttrain dev-cluster up | tail -n 1)
export KUBECONFIG=$kubeconfig
kubectl_bin=$(python3 -c 'from disttrain_operator.devcluster.versions import cache_paths; print(cache_paths().binary("kubectl"))')
kubectl() { "$kubectl_bin" "$@"; }

log=${TMPDIR:-/tmp}/disttrain-operator.log
disttrain operator --all-namespaces --liveness=http://127.0.0.1:18080/healthz >"$log" 2>&1 &
operator_pid=$!
trap 'kill $operator_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 60); do
  curl -fs http://127.0.0.1:18080/healthz >/dev/null 2>&1 && break
  sleep 1
done

kubectl create namespace quickstart --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl delete dtj mnist-mwms -n quickstart --ignore-not-found --wait=true >/dev/null
kubectl apply -n quickstart -f examples/multi-worker-mirrored-gpu.yaml
kubectl wait -n quickstart --for=condition=Running dtj/mnist-mwms --timeout=120s
kubectl get dtj,pods -n quickstart -o wide

echo "worker 0 finishes (as the trainer would):"
kubectl patch pod mnist-mwms-worker-0 -n quickstart --subresource=status --type=merge \
  -p '{"status":{"phase":"Succeeded","containerStatuses":[{"name":"tensorflow","image":"disttrain/trainer:0.1.0","imageID":"","ready":false,"restartCount":0,"state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]}}'
kubectl wait -n quickstart --for=condition=Succeeded dtj/mnist-mwms --timeout=120s
kubectl get dtj -n quickstart
echo "operator log: $log; KUBECONFIG=$KUBECONFIG; stop the cluster with: disttrain dev-cluster down"
