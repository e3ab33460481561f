# llmkube controller image: non-root, works with a read-only root filesystem (only /tmp is written).
#
# BASE_IMAGE: python:3.11-slim pinned by the digest of its multi-platform index (Python 3.11.15 on
# Debian trixie, as published on 2026-08-05: docker-library/repo-info, repos/python/remote/
# 3.11-slim.md). Any Debian-like image with Python 3.11 and venv support works: the node tier
# builds on a local stand-in (hack/build-images.sh, hack/images/python.Containerfile), since its
# builds reach no registry. Python packages come only from the locks in requirements/ (`make
# lock`): every version pinned, every file's hash checked, wheels only.
ARG BASE_IMAGE=python:3.11-slim@sha256:90744cff8f32887f075c47d747a173ff333e9e98801667af93c357fa9f5e28ff

FROM ${BASE_IMAGE} AS build
WORKDIR /src
# The dependencies first: a change to llmkube's sources does not fetch them again.
COPY requirements ./requirements
RUN python3 -m venv /opt/build \
 && /opt/build/bin/pip install --no-cache-dir --require-hashes --only-binary=:all: \
      --requirement requirements/build.txt \
 && python3 -m venv --without-pip /opt/llmkube \
 && /opt/build/bin/pip --python /opt/llmkube/bin/python install --no-cache-dir --require-hashes \
      --only-binary=:all: --requirement requirements/controller.txt
COPY pyproject.toml README.md ./
COPY llmkube ./llmkube
# The image runs the controller (and the user commands): not the developer's commands
# (`llmkube cluster` / `run`); the local clusters and fixtures they use live outside the package.
RUN rm -rf llmkube/devcli
# The wheel bundles these (pyproject.toml: force-include) for `llmkube cluster` / `run`.
COPY manifests ./manifests
COPY hack/build-k8s.sh ./hack/build-k8s.sh
# Built offline from the locked build requirements; installed without dependencies (all locked above).
RUN /opt/build/bin/pip wheel --no-cache-dir --no-deps --no-build-isolation --no-index --wheel-dir /dist . \
 && /opt/build/bin/pip --python /opt/llmkube/bin/python install --no-cache-dir --no-deps --no-index \
      --find-links /dist llmkube \
 && /opt/build/bin/pip --python /opt/llmkube/bin/python check

FROM ${BASE_IMAGE}
ARG BASE_IMAGE
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="llmkube" \
      org.opencontainers.image.description="Kubernetes operator for self-hosted LLM inference (llama.cpp, vLLM, TGI, PersonaPlex, any container)" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/llmkube/bin:$PATH
# jemalloc, not glibc's malloc. Under write storms glibc's main heap kept a few tenths of a MiB more
# after every storm, while Python's live objects and glibc's bytes in use stayed flat: its free space
# fragments between long-lived cache entries and transient response buffers. With jemalloc the RSS
# stays flat from storm to storm (bench/bench_write_storms.py); its background thread gives freed
# pages back while the controller is idle. LD_PRELOAD= (empty) in the pod runs glibc's again.
# Not pinned by version: it comes from the Debian release of the base image (pinned by digest), whose
# point releases carry only fixes, and a pin would break the build at the next one.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends libjemalloc2 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \
 && ln -s "$(find /usr/lib -name libjemalloc.so.2 -print -quit)" /usr/local/lib/libjemalloc.so.2
ENV LD_PRELOAD=/usr/local/lib/libjemalloc.so.2 \
    MALLOC_CONF=background_thread:true
# The build fails rather than ship an image whose preload silently does nothing.
RUN python3 -c "import sys; sys.exit(0 if 'libjemalloc' in open('/proc/self/maps').read() else 'jemalloc is not loaded')"
COPY --from=build /opt/llmkube /opt/llmkube
RUN useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin llmkube
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["llmkube"]
CMD ["controller"]
