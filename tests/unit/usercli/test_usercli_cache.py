"""`llmkube cache list`: rows from what the controller records (a Model's cacheKey, stagedFiles,
size and phase) and the services that name it; Models without a cache key (a repository the
runtime resolves) hold nothing in the cache and are left out."""

import argparse
from typing import Any

from llmkube.usercli.cache import CacheRow, cache_rows
from llmkube.usercli.parser import add_user_commands


def model(namespace: str, name: str, **status: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"source": "x"}, "status": status}


def service(namespace: str, name: str, model_ref: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"modelRef": model_ref}}


def test_a_row_per_cached_model_with_its_files_size_and_users() -> None:
    models = [
        model(
            "b", "split", cacheKey="k2", stagedFiles=["m-1.gguf", "m-2.gguf"], size="4.0 GiB", phase="Ready"
        ),
        model("a", "tiny", cacheKey="k1", size="12.0 MiB", phase="Downloading"),
        model("a", "resolved", phase="Ready"),  # no cache key: the runtime fetches it, nothing cached
    ]
    services = [service("b", "web", "split"), service("b", "api", "split"), service("a", "web", "split")]
    assert cache_rows(models, services) == [
        CacheRow("a", "tiny", "k1", "1", "12.0 MiB", "-", "Downloading"),
        CacheRow("b", "split", "k2", "m-1.gguf, m-2.gguf", "4.0 GiB", "api, web", "Ready"),
    ]


def test_the_commands_parse() -> None:
    parser = argparse.ArgumentParser()
    add_user_commands(parser.add_subparsers())
    listed = parser.parse_args(["cache", "list", "-A", "-o", "json"])
    assert (listed.all_namespaces, listed.output) == (True, "json")
    preload = parser.parse_args(["cache", "preload", "tiny", "-n", "ml"])
    assert (preload.model, preload.namespace) == ("tiny", "ml")
