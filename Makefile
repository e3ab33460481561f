# Every target does its own set-up: a fresh clone needs nothing but Python 3.11+, Go and make.
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)
PYTEST_ARGS ?=

.PHONY: help all venv k8s-binaries tools node-prereqs image push dist test test-unit fuzz-long lint lock crds run bench clean faults fault-long soak

## Lint, then the whole test suite (the default target).
all: lint test

## This list: each target with what it does (the comment above it in this Makefile).
help:
	@awk 'function flush(t) { if (t != "" && doc != "") { printf "  %-14s", t; n = split(doc, w, " "); col = 0; \
	        for (i = 1; i <= n; i++) { if (col + length(w[i]) > 80) { printf "\n  %-14s", ""; col = 0 } \
	        printf "%s%s", (col ? " " : ""), w[i]; col += length(w[i]) + 1 } printf "\n" } doc = "" } \
	    /^## / { doc = doc (doc == "" ? "" : " ") substr($$0, 4); next } \
	    /^[a-z][a-z0-9-]*:/ { split($$0, t, ":"); gsub(/\$$\$$/, "$$", doc); flush(t[1]); next } \
	    { doc = "" }' $(firstword $(MAKEFILE_LIST))

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@rm -f $(VENV)/.installed-*; touch $@

## The development environment in .venv (the package, editable, with its dev extra).
venv: $(STAMP)

## Build (or reuse from ~/.cache/llmkube) kube-apiserver, controller-manager, scheduler, etcd, kwok.
k8s-binaries:
	bash hack/build-k8s.sh

## Build (or reuse from ~/.cache/llmkube) helm, promtool, kustomize, the GitOps health checkers and
## prometheus-adapter for the install/monitoring/GitOps tests and the autoscaling node test.
tools:
	bash hack/build-tools.sh

## The node tier's packages, kubelet/kube-proxy/kubectl and local images (root on Linux; elsewhere
## it says why and the node tests are skipped with that reason).
node-prereqs: venv
	PYTHON=$(abspath $(BIN))/python bash hack/node-prereqs.sh

## The controller image from the Dockerfile, with buildah, podman or docker (the first found; or
## CONTAINER_TOOL=...): localhost/llmkube:<version>, or IMAGE=...; PLATFORMS=linux/amd64,linux/arm64
## for a multi-arch manifest where the builder can emulate them; ARCHIVE=llmkube.tar also writes an
## OCI archive (kind, k3s); BASE_IMAGE=... replaces the pinned base (hack/image.sh, docs/install.md).
image:
	bash hack/image.sh build

## Push that image: make push REGISTRY=ghcr.io/you -> ghcr.io/you/llmkube:<version>.
push:
	bash hack/image.sh push

## Everything a release publishes, into dist/ with SHA256SUMS: the wheel, the sdist, the chart
## (helm package) and the image as an OCI archive (make image's path, with its variables;
## DIST_IMAGE=none leaves the image out). hack/dist.sh; .github/workflows/release.yml pushes them.
dist: venv
	@bash hack/build-tools.sh helm >/dev/null
	PYTHON=$(abspath $(BIN))/python bash hack/dist.sh

## The whole test suite: unit, integration (real kube-apiserver), e2e (full local control plane)
## and node (a real kubelet and containerd, where the machine allows). The release tools and the
## node tier build in the background while the tests that need neither run (hack/test.sh).
test:
	@# The venv and the Kubernetes binaries side by side: one waits on PyPI, the other compiles.
	@$(MAKE) --no-print-directory -j2 venv k8s-binaries
	PYTHON=$(abspath $(BIN))/python bash hack/test.sh $(PYTEST_ARGS)

## The schema-driven fuzz, long: 300 specs and 300 transitions dry-run on the API server; prints figures.
fuzz-long: venv k8s-binaries
	LLMKUBE_FUZZ_EXAMPLES=300 $(BIN)/python -m pytest tests/integration/test_spec_fuzz_on_server.py $(PYTEST_ARGS)

## The fault suite alone (tests/faults: kills, compaction, silent watches, injected errors, hostile input).
faults: venv k8s-binaries
	$(BIN)/python -m pytest tests/faults -s $(PYTEST_ARGS)

## Its longer variants: more services and kills, the real default timeouts (about 15 minutes).
fault-long: venv k8s-binaries
	LLMKUBE_FAULT_LONG=1 $(BIN)/python -m pytest tests/faults tests/e2e/test_semantic_corpus.py -s $(PYTEST_ARGS)

## 30 minutes of 10 changes/s over 1,000 services: RSS, descriptors, sockets, threads, tasks stay flat.
soak: venv k8s-binaries
	LLMKUBE_SOAK_SECONDS=$${LLMKUBE_SOAK_SECONDS:-1800} $(BIN)/python -m pytest tests/faults/test_soak.py -s $(PYTEST_ARGS)

## Only the fast, pure tests (no control plane).
test-unit: venv
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

## ruff, ruff format, mypy --strict, the import contracts, hadolint.
lint: venv
	$(BIN)/ruff check llmkube tests bench hack
	$(BIN)/ruff format --check llmkube tests bench hack
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/hadolint Dockerfile hack/images/pause/Containerfile
	@# The node tier's stand-ins install Debian packages unpinned on purpose (DL3008): a pinned version
	@# leaves the mirror with the next security update, and the test images would stop building.
	$(BIN)/hadolint --ignore DL3008 hack/images/*.Containerfile

## Pin the image's requirements with hashes (requirements/*.txt) after a change in pyproject.toml.
lock: venv
	$(BIN)/python hack/lock-requirements.py

## Every figure of docs/performance.md, with the commands that produced it (about an
## hour on 2 cores; results land in bench/results/*.json with the machine and load they came from).
bench: venv k8s-binaries
	$(BIN)/python bench/bench_import_cost.py
	$(BIN)/python bench/bench_cache_memory.py --services 1000
	$(BIN)/python bench/bench_scale.py --services 200 --repeat 3 --idle 20 --restart-window 60 --changes 20
	$(BIN)/python bench/bench_scale.py --services 1000 --repeat 3 --idle 20 --restart-window 30 --changes 20
	$(BIN)/python bench/bench_scale.py --services 5000 --idle 20 --restart-window 30 --changes 60
	$(BIN)/python bench/bench_scale.py --services 10000 --no-floor --idle 10 --restart-window 90 --changes 0
	$(BIN)/python bench/bench_state_metrics.py --services 1000 10000
	$(BIN)/python bench/bench_gpu_queue.py --waiting 1000 5000
	$(BIN)/python bench/bench_router.py --requests 1000

## Regenerate manifests/crd from the API types (never edit those files by hand).
crds: venv
	$(BIN)/python hack/gen-crds.py
	$(BIN)/python hack/gen-api-reference.py

## Run the controller: against $$KUBECONFIG / --kubeconfig when given, else a local embedded control plane
## (a real node serving a tiny llama.cpp model where the machine allows it: root on Linux).
## AGENT=1: also a metal sample served by a host agent on this machine (llmkube run --with-agent).
run: venv
	@if [ -z "$$KUBECONFIG" ]; then $(MAKE) --no-print-directory node-prereqs; fi
	$(BIN)/llmkube run $(if $(AGENT),--with-agent) $(RUN_ARGS)

## Remove the venv and the linters' caches (~/.cache/llmkube stays).
clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
