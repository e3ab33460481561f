# llmkube controller image: non-root, works with a read-only root filesystem (only /tmp is written).
# BASE_IMAGE: any Debian-like image with Python >= 3.11 and venv support (the node tier builds it
# from a local stand-in, hack/images/python.Containerfile); the package lives in a venv, so it
# does not depend on where a distribution's pip would put files.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY llmkube ./llmkube
# The wheel bundles the manifests and the build script `llmkube cluster` reads (pyproject force-include).
COPY manifests ./manifests
COPY hack/build-k8s.sh ./hack/build-k8s.sh
RUN python3 -m venv /opt/llmkube && /opt/llmkube/bin/pip install --no-cache-dir .

FROM ${BASE_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/llmkube/bin:$PATH
COPY --from=build /opt/llmkube /opt/llmkube
RUN useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin llmkube
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["llmkube"]
CMD ["controller"]
