# llmkube controller image: non-root, works with a read-only root filesystem (only /tmp is written).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY llmkube ./llmkube
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /install /usr/local
RUN useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin llmkube
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["llmkube"]
CMD ["controller"]
