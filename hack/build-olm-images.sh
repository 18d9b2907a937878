#!/usr/bin/env bash
# Build the OLM bundle images (bundle/<package>/bundle.Dockerfile) and the file-based catalog
# image (catalog/, served by opm) and push them: <registry>/<package>-bundle:<tag> and
# <registry>/opsuite-catalog:<tag>. catalog/ names its bundles ghcr.io/opsuite/<package>-bundle:<tag>;
# the tag must be that one (a registry that mirrors ghcr.io, as the OLM job's, serves the rest).
# With --push the bundles' CSVs name the operator images, and the catalog image every image, by
# digest (hack/pin_digests.py): the operator images must be in <registry> already.
# Usage: hack/build-olm-images.sh <registry> <tag> [--push]   (without --push: --load, one platform)
# OLM_SOURCE: the tree holding bundle/ and catalog/ (default: this checkout's); the OLM job of
# e2e.yaml builds the upgrade test's two releases (hack/olm_images.py --releases) with it.
# Used by .github/workflows/release.yaml and the OLM job of e2e.yaml.
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 || ( $# -eq 3 && "$3" != --push ) ]]; then
  echo "usage: $0 <registry> <tag> [--push]" >&2
  exit 2
fi
registry="$1" tag="$2"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
tree="${OLM_SOURCE:-$root}"
# The opm image the catalog is served by: operator-registry v1.73.0, the version
# hack/tools/opm pins.
opm_image="quay.io/operator-framework/opm:v1.73.0@sha256:e5a6220603fb4504d58c6e3e488386b817e3695c906a62ee0370b5faedc3799a"
if [[ $# -eq 3 ]]; then
  output=(--push --platform linux/amd64,linux/arm64)
else
  output=(--load)
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for dir in "$tree"/bundle/*/; do
  package="$(basename "$dir")"
  if ! grep -qx "image: ghcr.io/opsuite/$package-bundle:$tag" "$tree/catalog/$package/catalog.yaml"; then
    echo "$tree/catalog/$package does not name ghcr.io/opsuite/$package-bundle:$tag" >&2
    exit 1
  fi
  cp -r "$dir" "$work/$package"
  if [[ $# -eq 3 ]]; then
    # Pushed: the CSV's Deployment and relatedImages name the operator image by the digest
    # <registry> serves, so that OLM runs exactly what was published (and a mirror by digest
    # can serve it).
    python3 hack/pin_digests.py "$work/$package/manifests" --registry-for "ghcr.io/opsuite=$registry"
  fi
  docker buildx build "${output[@]}" -f "$work/$package/bundle.Dockerfile" \
    -t "$registry/$package-bundle:$tag" "$work/$package"
done

hack/build-tools.sh opm
cp -r "$tree/catalog" "$work/catalog"
if [[ $# -eq 3 ]]; then
  # Pushed: the catalog names the bundles and the operator images by the digests <registry>
  # serves (OCI_USERNAME/OCI_PASSWORD for a private registry), for disconnected installs.
  python3 hack/pin_digests.py "$work/catalog" --registry-for "ghcr.io/opsuite=$registry"
fi
.local/bin/opm generate dockerfile "$work/catalog" --base-image "$opm_image" --builder-image "$opm_image"
docker buildx build "${output[@]}" -f "$work/catalog.Dockerfile" \
  -t "$registry/opsuite-catalog:$tag" "$work"
