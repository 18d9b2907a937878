# opsuite: one entry point for building, running and testing the operators.
# `make help` lists the targets.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

VENV := .venv/bin
PY := $(VENV)/python
PYTEST := $(VENV)/pytest
export PATH := $(CURDIR)/.local/bin:$(PATH)

PY_SOURCES := shared operators e2e hack bench

.PHONY: help
help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

##@ Set-up
.PHONY: doctor deps tools images
doctor: ## Check this machine for what make run and make test need (changes nothing)
	@python3 hack/doctor.py

deps: ## Install Debian packages, poetry (its own virtualenv) and the project's .venv (skips what is there)
	hack/install-deps.sh

tools: deps ## Build the pinned Go tools (control plane, kwok, helm, actionlint) into .local/bin
	hack/build-tools.sh

images: deps ## Build the images (operators with BuildKit, workloads from Debian packages) into .local/images
	hack/build-tools.sh buildkit runc
	python3 hack/images.py build

##@ Local control plane
.PHONY: cluster cluster-down
cluster: tools images ## Start etcd, kube-apiserver, controller-manager, scheduler, kwok and a real node
	python3 hack/localplane.py up

cluster-down: ## Stop the local control plane and remove its data
	python3 hack/localplane.py down

##@ Development
.PHONY: run manifests bundle verify lint typecheck unit e2e e2e-in-cluster e2e-olm scorecard chaos test bench bench-reference bench-probes
run: doctor deps ## Build and start the local plane, run the operators with their samples (RUN_ARGS: hack/run.py --help)
	$(PY) hack/run.py $(RUN_ARGS)

manifests: deps ## Generate CRDs (charts/*/crds) and samples from the pydantic models
	$(PY) hack/manifests.py write

bundle: manifests ## Generate the OLM bundles (bundle/), the catalog (catalog/) and the plain install manifests (deploy/) from the charts
	hack/build-tools.sh helm opm
	$(PY) hack/bundle.py write

verify: deps ## Fail when a generated file is out of date
	$(PY) hack/manifests.py check
	hack/build-tools.sh helm opm
	$(PY) hack/bundle.py check

lint: deps ## ruff (lint + format check), hadolint on the Dockerfile, actionlint on the workflows, kube-score on the rendered charts
	$(VENV)/ruff check $(PY_SOURCES)
	$(VENV)/ruff format --check $(PY_SOURCES)
	$(VENV)/hadolint Dockerfile
	hack/build-tools.sh actionlint
	actionlint
	hack/build-tools.sh helm kube-score
	$(PY) hack/kube_score.py

typecheck: deps ## mypy --strict
	$(VENV)/mypy shared operators e2e bench hack/localplane.py hack/plane_pki.py hack/plane_config.py hack/node.py hack/images.py hack/oci hack/oci_push.py hack/olm_images.py hack/olm_manifest.py hack/scorecard.py hack/pin_digests.py hack/workflow_actions.py hack/poetry_requirements.py hack/doctor.py hack/run.py hack/manifests.py hack/bundle.py hack/helm_render.py hack/kube_score.py hack/tests

unit: deps ## Unit and property tests (no cluster)
	@echo "==================== unit tests ===================="
	hack/build-tools.sh helm opm bundle-validate registry promtool kube-score
	$(PYTEST) shared/tests operators hack/tests bench/tests -p no:kind

e2e: deps ## End-to-end tests on E2E_KUBECONFIG, kind (Docker) or the local plane (E2E_OPERATORS=in-cluster: make e2e-in-cluster)
ifeq ($(E2E_OPERATORS),in-cluster)
	$(MAKE) --no-print-directory e2e-in-cluster
else
	@echo "==================== e2e tests ====================="
	@if [[ -z "$${E2E_KUBECONFIG:-}" ]] && ! docker info >/dev/null 2>&1; then $(MAKE) --no-print-directory cluster; fi
	hack/build-tools.sh helm argocd-health
	$(PYTEST) e2e -m "not chaos"
endif

e2e-in-cluster: deps images ## The charts with the real images on the local plane's real node: the previous release, the Helm upgrade under load, then e2e (E2E_MARKERS)
	@echo "============= e2e tests, operators in-cluster ======"
	@if [[ -z "$${KUBECONFIG:-}" ]]; then $(MAKE) --no-print-directory cluster; fi
	hack/build-tools.sh helm argocd-health
	hack/e2e-in-cluster.sh load
	hack/e2e-in-cluster.sh install-previous
	hack/e2e-in-cluster.sh upgrade
	hack/e2e-in-cluster.sh test
	hack/e2e-in-cluster.sh uninstall
	hack/e2e-in-cluster.sh plain

e2e-olm: deps images ## OLM on the local plane's real node: images in its registry, OLM, a Subscription per operator (previous release), the upgrade along the catalog, the smoke subset
	@echo "============= e2e tests, operators from OLM ========"
	@if [[ -z "$${KUBECONFIG:-}" ]]; then $(MAKE) --no-print-directory cluster; fi
	hack/build-tools.sh opm olm grpc-health-probe
	hack/e2e-olm.sh publish
	hack/e2e-olm.sh install
	hack/e2e-olm.sh subscribe
	hack/e2e-olm.sh upgrade
	hack/e2e-olm.sh test
	hack/e2e-olm.sh uninstall

scorecard: deps ## operator-sdk scorecard (basic and olm suites) on every bundle, on the local plane's real node (not in make test)
	@echo "==================== scorecard ====================="
	@if [[ -z "$${KUBECONFIG:-}" ]]; then $(MAKE) --no-print-directory cluster; fi
	hack/build-tools.sh operator-sdk
	$(PY) hack/scorecard.py

chaos: deps ## Chaos tests (API server and etcd faults, operator SIGKILLs, network faults: needs root) on the local plane
	@echo "==================== chaos tests ==================="
	hack/build-tools.sh helm
	$(PYTEST) e2e -m chaos
	$(PY) -m bench.robustness

test: doctor lint typecheck unit verify e2e ## Everything CI checks (the e2e suite with local operators, then in-cluster: smoke and the Deployments' own checks, then the OLM route)
	E2E_MARKERS="smoke or in_cluster" $(MAKE) --no-print-directory e2e-in-cluster
	$(MAKE) --no-print-directory e2e-olm

bench: deps bench-reference ## Benchmarks (bench/) against references run alongside, then bench/README.md's report
	$(PY) -m bench all

bench-reference: ## Build the Go reference operators (bench/reference) into .local/bench-reference/bin
	bench/reference/build.sh

bench-probes: deps ## /healthz and /readyz latency under a PodSet 0->500->0 load (KUBECONFIG=... for another cluster)
	$(PY) -m bench probes --rounds 2 $(if $(KUBECONFIG),--kubeconfig $(KUBECONFIG))
