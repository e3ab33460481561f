"""The chart's conventions: camelCase values (the dashed names of older charts still read, and never
silently two different images for one server), Chart.yaml's home and sources."""

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from install_support import CHART, documents, the_deployment
from tools import run, tool

from llmkube.plan.inferenceservice.images import parse_runtime_images


@pytest.fixture
def helm_env(tmp_path: Path) -> dict[str, str]:
    return {name: str(tmp_path / name) for name in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")}


def runtime_images(helm_env: dict[str, str], *values: str) -> dict[str, str]:
    """What the controller reads from the chart's --runtime-images (its own parser)."""
    argv: list[str | Path] = ["template", "llmkube", CHART]
    for value in values:
        argv += ["--set", value]
    docs: list[dict[str, Any]] = documents(run(tool("helm"), *argv, env=helm_env))
    (container,) = the_deployment(docs)["spec"]["template"]["spec"]["containers"]
    flags = [
        arg.removeprefix("--runtime-images=")
        for arg in container["args"]
        if arg.startswith("--runtime-images=")
    ]
    return parse_runtime_images(flags[0]) if flags else {}


def test_every_value_key_is_camel_case() -> None:
    def keys(node: Any, path: str = "") -> list[str]:
        if not isinstance(node, dict):
            return []
        found = []
        for key, child in node.items():
            # label and annotation maps are the user's keys, not the chart's
            if key in (
                "labels",
                "commonLabels",
                "podLabels",
                "podAnnotations",
                "annotations",
                "metricsNamespaceLabels",
            ):
                continue
            found += [f"{path}{key}", *keys(child, f"{path}{key}.")]
        return found

    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert [key for key in keys(values) if "-" in key.rsplit(".", 1)[-1] or "_" in key] == []


def test_camel_case_and_older_runtime_image_names(helm_env: dict[str, str]) -> None:
    assert runtime_images(helm_env) == {}
    assert runtime_images(
        helm_env, "runtimeImages.llamacppCuda=mirror.local/llama:cuda", "runtimeImages.vllm=m/v:1"
    ) == {
        "llamacpp-cuda": "mirror.local/llama:cuda",
        "vllm": "m/v:1",
    }
    # an older chart's values file still works, alone or agreeing with the new name
    assert runtime_images(helm_env, "runtimeImages.llamacpp-rocm=mirror.local/llama:rocm") == {
        "llamacpp-rocm": "mirror.local/llama:rocm"
    }
    both = ("runtimeImages.llamacppIntel=m/l:sycl", "runtimeImages.llamacpp-intel=m/l:sycl")
    assert runtime_images(helm_env, *both) == {"llamacpp-intel": "m/l:sycl"}


def test_two_names_for_one_image_that_disagree_are_refused(helm_env: dict[str, str]) -> None:
    argv = ["template", "llmkube", str(CHART), "--set", "runtimeImages.llamacppCuda=a/b:1"]
    argv += ["--set", "runtimeImages.llamacpp-cuda=a/b:2"]
    result = subprocess.run(
        [str(tool("helm")), *argv],
        capture_output=True,
        text=True,
        env={**os.environ, **helm_env},
        check=False,
    )
    assert result.returncode != 0
    assert (
        "runtimeImages.llamacppCuda and runtimeImages.llamacpp-cuda (its older name) name different images"
        in result.stderr
    )


def test_the_chart_names_its_home_and_sources() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["home"] == "https://github.com/llmkube/llmkube"
    assert chart["sources"] == ["https://github.com/llmkube/llmkube"]
