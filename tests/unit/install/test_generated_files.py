"""Generated install files (alerts, dashboards, the Argo CD snippet, the chart's copies of manifests/)
are what their sources produce: one source of truth for each."""

import importlib.util
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]


def load_script(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), ROOT / "hack" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_generated_install_file_is_current() -> None:
    stale = [
        str(path.relative_to(ROOT))
        for path, text in load_script("gen-install-files").rendered().items()
        if not path.is_file() or path.read_text() != text
    ]
    assert not stale, f"stale generated files {stale}: run `python hack/gen-install-files.py`"


def test_the_argocd_snippet_carries_each_lua_script_verbatim() -> None:
    argocd = ROOT / "manifests" / "gitops" / "argocd"
    data = yaml.safe_load((argocd / "argocd-cm-health.yaml").read_text())["data"]
    assert data == {
        "resource.customizations.health.inference.llmkube.dev_InferenceService": (
            argocd / "health-inferenceservice.lua"
        ).read_text(),
        "resource.customizations.health.inference.llmkube.dev_Model": (
            argocd / "health-model.lua"
        ).read_text(),
        "resource.customizations.health.inference.llmkube.dev_GPUQuota": (
            argocd / "health-gpuquota.lua"
        ).read_text(),
        "resource.customizations.health.inference.llmkube.dev_ModelRouter": (
            argocd / "health-modelrouter.lua"
        ).read_text(),
    }


def test_the_health_scripts_share_one_prelude() -> None:
    sources = ROOT / "hack" / "argocd-health"
    prelude = (sources / "prelude.lua").read_text()
    for source, script in (
        ("inferenceservice.lua", "health-inferenceservice.lua"),
        ("model.lua", "health-model.lua"),
        ("modelrouter.lua", "health-modelrouter.lua"),
    ):
        text = (sources / source).read_text()
        assert text.count("-- #include prelude.lua\n") == 1 and prelude not in text
        assert (ROOT / "manifests" / "gitops" / "argocd" / script).read_text().count(prelude) == 1
