"""What Argo CD makes of the statuses the controller writes, computed by the Lua Argo CD embeds:
gopher-lua with the libraries Argo CD opens for a health script (hack/tools/argocd-health.go,
built by hack/build-tools.sh), reading the scripts from the argocd-cm snippet users apply.

The unit tests run the same cases in PUC Lua 5.1 (lupa), which is faster but more permissive: it
opens the string and math libraries, which Argo CD does not."""

import json
from pathlib import Path
from typing import Any

import pytest
from argocd_health import health
from argocd_health_cases import ISVC_CASES, MODEL_CASES, QUOTA_CASES, ROUTER_CASES
from tools import ROOT, run, tool

ARGOCD_CM = ROOT / "manifests" / "gitops" / "argocd" / "argocd-cm-health.yaml"
CASES = ISVC_CASES + MODEL_CASES + QUOTA_CASES + ROUTER_CASES


def gopher_lua(objects: list[dict[str, Any]], directory: Path, cm: Path = ARGOCD_CM) -> list[dict[str, str]]:
    path = directory / "objects.json"
    path.write_text(json.dumps(objects))
    lines = run(tool("argocd-health"), cm, path).splitlines()
    assert len(lines) == len(objects), lines
    return [json.loads(line) for line in lines]


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, str]]:
    return gopher_lua([obj for _, obj, _, _ in CASES], tmp_path_factory.mktemp("argocd"))


@pytest.mark.parametrize("index", range(len(CASES)), ids=[f"{c[1]['kind']}: {c[0]}" for c in CASES])
def test_argo_cd_reads_each_status_as_the_unit_tests_expect(index: int, judged: list[dict[str, str]]) -> None:
    case, obj, status, message = CASES[index]
    found = judged[index]
    assert "error" not in found, (case, found)
    assert found["status"] == status, (case, found)
    assert message in found["message"], (case, found)
    # And Lua 5.1 agrees word for word: the unit tests' engine is a stand-in only where they agree.
    assert (found["status"], found["message"]) == tuple(health(obj)), case


def test_a_script_that_needs_the_string_library_fails_as_in_argo_cd(tmp_path: Path) -> None:
    """The reason for this tier: Lua 5.1 runs this script, Argo CD's Lua does not."""
    script = 'return {status = "Healthy", message = string.format("%d replicas", 2)}'
    cm = tmp_path / "argocd-cm.yaml"
    block = "\n".join(f"    {line}" for line in script.splitlines())
    cm.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: argocd-cm}\ndata:\n"
        f"  resource.customizations.health.inference.llmkube.dev_Model: |\n{block}\n"
    )
    obj = {"apiVersion": "inference.llmkube.dev/v1alpha1", "kind": "Model", "metadata": {"name": "m"}}
    [found] = gopher_lua([obj], tmp_path, cm)
    assert "string" in found.get("error", ""), found
    script_file = tmp_path / "check.lua"
    script_file.write_text(script)
    assert health(obj, script_file).status == "Healthy"


def test_a_status_argo_cd_does_not_know_is_unknown(tmp_path: Path) -> None:
    cm = tmp_path / "argocd-cm.yaml"
    cm.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: argocd-cm}\ndata:\n"
        "  resource.customizations.health.inference.llmkube.dev_Model: |\n"
        '    return {status = "Fine", message = "all good"}\n'
    )
    obj = {"apiVersion": "inference.llmkube.dev/v1alpha1", "kind": "Model", "metadata": {"name": "m"}}
    assert gopher_lua([obj], tmp_path, cm) == [
        {"status": "Unknown", "message": "Lua returned an invalid health status"}
    ]
