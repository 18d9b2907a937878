#!/usr/bin/env bash
# Collect what a failed e2e run on a cluster needs for a post-mortem into <dir>: every operator's
# log (current and previous container), events of all namespaces, describe output of the operator
# namespace and of all pods, and OLM's objects when OLM is installed. Never fails: it runs after a
# failure, and whatever it can collect is worth keeping.
# Usage: hack/e2e-diagnostics.sh <dir>   (kubectl from PATH, cluster from KUBECONFIG)
set -uo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 <dir>" >&2
  exit 2
fi
out="$1"
mkdir -p "$out/logs"

kubectl get events -A --sort-by=.lastTimestamp -o wide >"$out/events.txt" 2>&1
kubectl get all,leases,catalogsources,subscriptions,installplans,csv -A -o wide \
  >"$out/objects.txt" 2>&1
kubectl describe all -n "${E2E_NAMESPACE:-opsuite-system}" >"$out/describe-operators.txt" 2>&1
kubectl describe pods -A >"$out/describe-pods.txt" 2>&1
kubectl describe catalogsources,subscriptions,installplans,csv -A >"$out/describe-olm.txt" 2>&1

# Every container of every pod in the namespaces that run operators (Helm's and OLM's).
for ns in "${E2E_NAMESPACE:-opsuite-system}" olm operators; do
  for pod in $(kubectl get pods -n "$ns" -o name 2>/dev/null); do
    name="${pod#pod/}"
    kubectl logs -n "$ns" "$name" --all-containers --timestamps >"$out/logs/$ns-$name.log" 2>&1
    kubectl logs -n "$ns" "$name" --all-containers --timestamps --previous \
      >"$out/logs/$ns-$name.previous.log" 2>/dev/null || rm -f "$out/logs/$ns-$name.previous.log"
  done
done
exit 0
