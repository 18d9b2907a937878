"""The project's images, built without Docker or a registry (``hack/images.py`` is the command).

The OCI image format: :mod:`oci.layout` (descriptors, blobs, configurations, manifests and
indexes), :mod:`oci.layer` (a tree as a layer, a layer onto a tree), :mod:`oci.archive` (an
image as one tar file, and back). The images made with it: :mod:`oci.debian_base` (the Python
base), :mod:`oci.small_images` (busybox, its stand-ins, pause), :mod:`oci.buildkit` (the
operators, from the Dockerfile); :mod:`oci.runc_verify` runs an operator image. What they share
(paths, commands, what is up to date) is :mod:`oci.workspace`.
"""
