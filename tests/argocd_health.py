"""Runs our Argo CD health checks (manifests/gitops/argocd/*.lua) the way Argo CD does: the object
becomes a Lua table (numbers as floats, as gopher-lua's LNumber), the script is the body of a
function that reads the global `obj` and returns {status, message}. Lua 5.1, the dialect gopher-lua
implements."""

from pathlib import Path
from typing import Any, NamedTuple

import lupa.lua51 as lua51

ARGOCD = Path(__file__).resolve().parents[1] / "manifests" / "gitops" / "argocd"
SCRIPTS = {
    "InferenceService": ARGOCD / "health-inferenceservice.lua",
    "Model": ARGOCD / "health-model.lua",
    "GPUQuota": ARGOCD / "health-gpuquota.lua",
    "ModelRouter": ARGOCD / "health-modelrouter.lua",
}
#: What Argo CD accepts from a health script.
ARGO_HEALTH_STATUSES = {"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"}


class Health(NamedTuple):
    status: str
    message: str


def _to_lua(runtime: Any, value: Any) -> Any:
    if isinstance(value, dict):
        return runtime.table_from(
            {key: _to_lua(runtime, item) for key, item in value.items() if item is not None}
        )
    if isinstance(value, list):
        return runtime.table_from([_to_lua(runtime, item) for item in value])
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    return value


def health(obj: dict[str, Any], script: Path | None = None) -> Health:
    path = script or SCRIPTS[obj["kind"]]
    runtime = lua51.LuaRuntime(unpack_returned_tuples=True)
    check = runtime.eval(f"function()\n{path.read_text()}\nend")
    runtime.globals().obj = _to_lua(runtime, obj)
    result = check()
    status, message = result["status"], result["message"]
    assert status in ARGO_HEALTH_STATUSES, f"{path.name} returned {status!r}, which Argo CD does not know"
    return Health(str(status), str(message))
