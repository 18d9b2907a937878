# The operators' images, one target each (docs/images.md):
#   docker buildx build --target podset-operator --build-arg VERSION=0.1.0 .
# builder: the project's wheel and its locked runtime requirements (hack/image/build-wheel.sh);
# install: a virtualenv of exactly those (hack/image/install-runtime.sh, also run by
# hack/tests/test_image_recipe.py); runtime: the base image without pip, plus that virtualenv;
# one stage per operator on top, whose entrypoint is the operator's console script.
# No "syntax" line: BuildKit's built-in frontend (which has RUN --mount) builds it offline too.
# PYTHON_IMAGE may also be hack/images.py's Debian base (python3.11 under /usr, no pip module).
# Steps that reach the package index trust the CA bundle passed as the optional secret "ca"
# (hack/images.py passes the machine's); it is mounted for the step only, never in an image.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS python
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

FROM python AS builder
ENV PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY pyproject.toml poetry.lock README.md ./
COPY shared/opsuite_common shared/opsuite_common
# BEGIN from operators/operators.toml (make manifests): operator packages
COPY operators/podset/podset_operator operators/podset/podset_operator
COPY operators/configmapsync/configmapsync_operator operators/configmapsync/configmapsync_operator
COPY operators/poddebugger/poddebugger_operator operators/poddebugger/poddebugger_operator
# END from operators/operators.toml
COPY hack/image/build-wheel.sh hack/image/pip.sh hack/image/poetry-requirements.txt hack/image/
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=secret,id=ca,required=false,target=/run/secrets/ca \
    if [ -f /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
    && hack/image/build-wheel.sh /dist /opt/poetry

FROM python AS install
ENV PIP_ROOT_USER_ACTION=ignore
COPY hack/image/install-runtime.sh hack/image/pip.sh /usr/local/bin/
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=secret,id=ca,required=false,target=/run/secrets/ca \
    --mount=type=bind,from=builder,source=/dist,target=/dist \
    if [ -f /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
    && install-runtime.sh /dist /opt/venv

FROM python AS runtime
# No package installer is left (pip, setuptools, wheel, ensurepip and its wheels) and the
# standard library's bytecode is compiled: hack/image/strip-runtime.sh, for either base image.
RUN --mount=type=bind,source=hack/image/strip-runtime.sh,target=/run/strip-runtime.sh \
    sh /run/strip-runtime.sh
COPY --from=install /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:${PATH}
ARG VERSION=dev
ARG REVISION=unknown
ARG SOURCE=""
LABEL org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="opsuite"
# Metrics (--metrics-bind-address) and health probes (--health-probe-bind-address).
EXPOSE 8080 8081
USER 65532:65532

# BEGIN from operators/operators.toml (make manifests): operator images
FROM runtime AS podset-operator
LABEL org.opencontainers.image.title="podset-operator" \
      org.opencontainers.image.description="Keeps N pods from a template running for each PodSet"
ENTRYPOINT ["/opt/venv/bin/podset-operator"]

FROM runtime AS configmapsync-operator
LABEL org.opencontainers.image.title="configmapsync-operator" \
      org.opencontainers.image.description="Copies a ConfigMap into other namespaces and keeps the copies in line"
ENTRYPOINT ["/opt/venv/bin/configmapsync-operator"]

FROM runtime AS pod-debugger-operator
LABEL org.opencontainers.image.title="pod-debugger-operator" \
      org.opencontainers.image.description="Adds an ephemeral debug container to every pod matching a selector"
ENTRYPOINT ["/opt/venv/bin/pod-debugger-operator"]
# END from operators/operators.toml
