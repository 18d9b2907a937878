#!/usr/bin/env bash
# Install every operator of catalog/ through OLM: a CatalogSource serving <catalog-image> in the
# olm namespace, and a Subscription per package (its default channel) in <namespace>, which must
# have an OperatorGroup (OLM's "operators" namespace has the global one). Waits until each CSV
# has succeeded and its Deployment is available. The operators serve plain-HTTP metrics here
# (OPSUITE_METRICS_SECURE=false in each Subscription's config): the e2e suite reads them through
# the API server's service proxy, which never passes the caller's token on.
# The CatalogSource polls its image every CATALOG_POLL_INTERVAL (default 10m): a catalog pushed
# again under the same tag reaches the cluster, and OLM upgrades the Subscriptions along it.
# Usage: hack/olm-subscribe.sh <catalog-image> <namespace>   (kubectl from PATH, KUBECONFIG)
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <catalog-image> <namespace>" >&2
  exit 2
fi
image="$1" namespace="$2"
root="$(cd "$(dirname "$0")/.." && pwd)"

kubectl apply -f - <<YAML
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: opsuite
  namespace: olm
spec:
  sourceType: grpc
  image: $image
  displayName: opsuite
  updateStrategy:
    registryPoll:
      interval: ${CATALOG_POLL_INTERVAL:-10m}
YAML
for _ in $(seq 120); do
  state="$(kubectl get catalogsource -n olm opsuite -o jsonpath='{.status.connectionState.lastObservedState}')"
  [[ "$state" == READY ]] && break
  sleep 5
done
[[ "$state" == READY ]] || { echo "CatalogSource opsuite: ${state:-no state}" >&2; exit 1; }

for dir in "$root"/catalog/*/; do
  package="$(basename "$dir")"
  channel="$(awk '$1=="defaultChannel:"{print $2; exit}' "$dir/catalog.yaml")"
  kubectl apply -f - <<YAML
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata:
  name: $package
  namespace: $namespace
spec:
  name: $package
  channel: $channel
  source: opsuite
  sourceNamespace: olm
  installPlanApproval: Automatic
  config:
    env:
      - name: OPSUITE_METRICS_SECURE
        value: "false"
YAML
done

for dir in "$root"/catalog/*/; do
  package="$(basename "$dir")"
  csv=""
  for _ in $(seq 120); do
    csv="$(kubectl get subscription -n "$namespace" "$package" -o jsonpath='{.status.installedCSV}')"
    [[ -n "$csv" ]] && break
    sleep 5
  done
  [[ -n "$csv" ]] || { echo "Subscription $package: no CSV installed" >&2; exit 1; }
  kubectl wait -n "$namespace" --for=jsonpath='{.status.phase}'=Succeeded --timeout=600s "csv/$csv"
  kubectl rollout status -n "$namespace" "deployment/$package" --timeout=300s
done
