#!/usr/bin/env bash
# Install the three charts as the in-cluster operators of the e2e suite (E2E_OPERATORS=in-cluster):
# each image is <image-prefix>/<chart>:<tag>, already on the nodes (kind load docker-image; kwok on
# the local plane starts no container), so it is never pulled. The values are the ones the e2e
# tests expect of every operator: debug logs, PodDebugger's allowed image prefix busybox, and the
# cluster-wide admission policies off (the policy tests bind their own copies to their namespaces).
#
# Usage: hack/e2e-install.sh <image-prefix> <tag>
# Environment: HELM (default helm), E2E_NAMESPACE (default opsuite-system), E2E_RELEASE_PREFIX
# (default none: each release is named like its chart, as the suite's in-cluster handles expect).
# .github/workflows/e2e.yaml runs this script; e2e/test_workflow_install.py runs it on the local
# plane.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <image-prefix> <tag>" >&2
  exit 2
fi
prefix="$1" tag="$2"
root="$(cd "$(dirname "$0")/.." && pwd)"
helm="${HELM:-helm}"
namespace="${E2E_NAMESPACE:-opsuite-system}"

for chart in podset-operator configmapsync-operator pod-debugger-operator; do
  values=()
  case "$chart" in
    configmapsync-operator) values=(--set admissionPolicy.enabled=false) ;;
    pod-debugger-operator)
      values=(--set admissionPolicy.enabled=false --set imageAllowlist.enabled=false
        --set 'imageAllowlist.prefixes={busybox}') ;;
  esac
  "$helm" upgrade --install "${E2E_RELEASE_PREFIX:-}$chart" "$root/charts/$chart" \
    --namespace "$namespace" --create-namespace \
    --set image.repository="$prefix/$chart" --set image.tag="$tag" --set image.pullPolicy=Never \
    --set logLevel=debug --set logFormat=text "${values[@]}" \
    --wait --timeout 5m
done
