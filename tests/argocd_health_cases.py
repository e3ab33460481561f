"""The cases the Argo CD health checks are judged on: one status per phase as the controller writes
them, plus the cases a status can be in between (no status yet, an older generation, a Ready
condition that disagrees with the phase). Run by Lua 5.1 in the unit tests
(tests/unit/gitops/test_argocd_health.py) and by gopher-lua, as Argo CD runs them, in
tests/gitops/test_argocd_health_gopher_lua.py."""

from typing import Any

API = "inference.llmkube.dev/v1alpha1"


def condition(type_: str, status: str, reason: str, message: str, generation: int = 1) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": "2026-11-30T10:00:00Z",
    }


def isvc(status: dict[str, Any] | None, generation: int = 1) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": API,
        "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": "team-a", "generation": generation},
        "spec": {"modelRef": "chat"},
    }
    if status is not None:
        obj["status"] = status
    return obj


def model(status: dict[str, Any] | None, generation: int = 1) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": API,
        "kind": "Model",
        "metadata": {"name": "chat", "namespace": "team-a", "generation": generation},
        "spec": {"source": "https://models.example/chat.gguf"},
    }
    if status is not None:
        obj["status"] = status
    return obj


def router(status: dict[str, Any] | None, generation: int = 1) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": API,
        "kind": "ModelRouter",
        "metadata": {"name": "gateway", "namespace": "team-a", "generation": generation},
        "spec": {
            "backends": [{"name": "chat", "inferenceServiceRef": {"name": "chat"}}],
            "defaultRoute": "chat",
        },
    }
    if status is not None:
        obj["status"] = status
    return obj


READY = {
    "phase": "Ready",
    "endpoint": "http://chat.team-a.svc.cluster.local:8080/v1/chat/completions",
    "conditions": [
        condition("Available", "True", "InferenceReady", "Inference service is ready and serving requests"),
        condition("Progressing", "False", "Ready", "All 1 replicas are ready"),
    ],
}

#: The summary conditions as the controller writes them (plan/conditions/summary.py).
SUMMARY_READY = [
    condition("Ready", "True", "Ready", "Inference service is ready and serving requests"),
    condition("Reconciling", "False", "Ready", "Inference service is ready and serving requests"),
]
ROLLING = "Rolling out the current spec: 1/2 replicas updated, 1 older still running"
SUMMARY_ROLLING_OUT = [
    condition("Ready", "False", "RollingOut", ROLLING, generation=2),
    condition("Reconciling", "True", "RollingOut", ROLLING, generation=2),
]

ISVC_CASES = [
    ("no status yet", isvc(None), "Progressing", "Waiting for the llmkube controller to report status"),
    ("status without phase", isvc({"conditions": []}), "Progressing", "Waiting for the llmkube controller"),
    (
        "Ready",
        isvc(READY),
        "Healthy",
        "Inference service is ready and serving requests at http://chat.team-a.svc.cluster.local:8080",
    ),
    (
        "Ready, but the spec changed since",
        isvc(READY, generation=2),
        "Progressing",
        "Waiting for the controller to observe generation 2 (status is for 1)",
    ),
    (
        "Ready with a top-level observedGeneration that is current",
        isvc({**READY, "observedGeneration": 2}, generation=2),
        "Healthy",
        "Inference service is ready",
    ),
    (
        "Ready phase, Ready condition False",
        isvc(
            {**READY, "conditions": [*READY["conditions"], condition("Ready", "False", "Rollout", "1/2 new")]}
        ),
        "Progressing",
        "Rollout: 1/2 new",
    ),
    (
        "as written now: serving the current spec",
        isvc({**READY, "conditions": [*READY["conditions"], *SUMMARY_READY]}),
        "Healthy",
        "Inference service is ready and serving requests at http://chat.team-a.svc.cluster.local:8080",
    ),
    (
        "as written now: a spec change rolling out (phase still Ready: old pods serve)",
        isvc({**READY, "conditions": [*READY["conditions"], *SUMMARY_ROLLING_OUT]}, generation=2),
        "Progressing",
        "RollingOut: Rolling out the current spec: 1/2 replicas updated, 1 older still running",
    ),
    (
        "as written now: failed (Stalled)",
        isvc(
            {
                "phase": "Failed",
                "conditions": [
                    condition(
                        "Ready", "False", "ImagePullBackOff", "image registry.invalid/x:1 cannot be pulled"
                    ),
                    condition(
                        "Reconciling",
                        "False",
                        "ImagePullBackOff",
                        "image registry.invalid/x:1 cannot be pulled",
                    ),
                    condition(
                        "Stalled", "True", "ImagePullBackOff", "image registry.invalid/x:1 cannot be pulled"
                    ),
                ],
            }
        ),
        "Degraded",
        "image registry.invalid/x:1 cannot be pulled",
    ),
    (
        "as written now: creating",
        isvc(
            {
                "phase": "Creating",
                "conditions": [
                    condition("Available", "False", "Creating", "No replica is ready yet (0/1)"),
                    condition("Ready", "False", "Creating", "No replica is ready yet (0/1)"),
                    condition("Reconciling", "True", "Creating", "No replica is ready yet (0/1)"),
                ],
            }
        ),
        "Progressing",
        "Creating: No replica is ready yet (0/1)",
    ),
    (
        "Ready condition True",
        isvc({**READY, "conditions": [condition("Ready", "True", "Serving", "Serving generation 1")]}),
        "Healthy",
        "Serving generation 1",
    ),
    (
        "Progressing (partly ready)",
        isvc(
            {
                "phase": "Progressing",
                "conditions": [
                    condition("Available", "True", "PartiallyReady", "Serving with 1/2 replicas ready"),
                    condition(
                        "Progressing", "True", "Creating", "Creating inference service (1/2 replicas ready)"
                    ),
                ],
            }
        ),
        "Progressing",
        "Progressing: Creating inference service (1/2 replicas ready)",
    ),
    (
        "Creating",
        isvc(
            {
                "phase": "Creating",
                "conditions": [
                    condition("Available", "False", "Creating", "No replica is ready yet (0/1)"),
                    condition(
                        "Progressing", "True", "Creating", "Creating inference service (0/1 replicas ready)"
                    ),
                ],
            }
        ),
        "Progressing",
        "Creating: Creating inference service (0/1 replicas ready)",
    ),
    (
        "Pending (model not ready)",
        isvc(
            {
                "phase": "Pending",
                "conditions": [
                    condition("Available", "False", "Pending", "Waiting for Model to be Ready"),
                    condition("Progressing", "True", "Pending", "Waiting for Model to be Ready"),
                ],
            }
        ),
        "Progressing",
        "Pending: Waiting for Model to be Ready",
    ),
    (
        "WaitingForGPU",
        isvc(
            {
                "phase": "WaitingForGPU",
                "queuePosition": 2,
                "conditions": [
                    condition(
                        "Available",
                        "False",
                        "WaitingForGPU",
                        "No replica is ready: waiting for GPU resources",
                    ),
                    condition("Progressing", "True", "WaitingForGPU", "Queued at position 2 waiting for GPU"),
                    condition(
                        "GPUAvailable",
                        "False",
                        "InsufficientGPU",
                        "Waiting for GPU resources: 2 nvidia.com/gpu",
                    ),
                ],
            }
        ),
        "Progressing",
        "Queued at position 2 waiting for GPU",
    ),
    (
        "Stopped (replicas 0)",
        isvc(
            {
                "phase": "Stopped",
                "conditions": [
                    condition("Available", "False", "Stopped", "Scaled to zero: spec.replicas is 0"),
                    condition("Progressing", "False", "Stopped", "Scaled to zero: spec.replicas is 0"),
                ],
            }
        ),
        "Suspended",
        "Scaled to zero: spec.replicas is 0",
    ),
    (
        "Failed (invalid spec)",
        isvc(
            {
                "phase": "Failed",
                "conditions": [
                    condition(
                        "Available", "False", "InvalidSpec", "spec.resources.memory: '4GB' is no quantity"
                    ),
                    condition(
                        "Progressing", "False", "InvalidSpec", "spec.resources.memory: '4GB' is no quantity"
                    ),
                    condition(
                        "Degraded", "True", "InvalidSpec", "spec.resources.memory: '4GB' is no quantity"
                    ),
                ],
            }
        ),
        "Degraded",
        "spec.resources.memory: '4GB' is no quantity",
    ),
    (
        "Failed without conditions",
        isvc({"phase": "Failed"}),
        "Degraded",
        "Failed",
    ),
    (
        "a Failed status for an older generation waits for the new one",
        isvc({"phase": "Failed", "conditions": [condition("Degraded", "True", "InvalidSpec", "bad")]}, 3),
        "Progressing",
        "Waiting for the controller to observe generation 3 (status is for 1)",
    ),
]


MODEL_CASES = [
    ("no status yet", model(None), "Progressing", "Waiting for the llmkube controller"),
    (
        "Ready",
        model(
            {
                "phase": "Ready",
                "conditions": [condition("Available", "True", "ModelReady", "Model downloaded and cached")],
            }
        ),
        "Healthy",
        "Model downloaded and cached",
    ),
    (
        "Copying",
        model(
            {
                "phase": "Copying",
                "conditions": [
                    condition("Progressing", "True", "CopyStarted", "Started copying local model")
                ],
            }
        ),
        "Progressing",
        "Copying: Started copying local model",
    ),
    ("Pending", model({"phase": "Pending"}), "Progressing", "Pending: Pending"),
    ("Downloading", model({"phase": "Downloading"}), "Progressing", "Downloading"),
    (
        "Failed",
        model(
            {
                "phase": "Failed",
                "conditions": [
                    condition(
                        "Available", "False", "InvalidSource", 'spec.source "model.gguf" is not supported'
                    ),
                    condition(
                        "Degraded", "True", "InvalidSource", 'spec.source "model.gguf" is not supported'
                    ),
                ],
            }
        ),
        "Degraded",
        'spec.source "model.gguf" is not supported',
    ),
    (
        "as written now: Ready",
        model(
            {
                "phase": "Ready",
                "conditions": [
                    condition("Available", "True", "ModelCached", "Model found in cache"),
                    condition("Ready", "True", "ModelCached", "Model found in cache"),
                    condition("Reconciling", "False", "ModelCached", "Model found in cache"),
                ],
            }
        ),
        "Healthy",
        "Model found in cache",
    ),
    (
        "as written now: copying",
        model(
            {
                "phase": "Copying",
                "conditions": [
                    condition("Progressing", "True", "CopyStarted", "Started copying local model"),
                    condition("Ready", "False", "CopyStarted", "Started copying local model"),
                    condition("Reconciling", "True", "CopyStarted", "Started copying local model"),
                ],
            }
        ),
        "Progressing",
        "CopyStarted: Started copying local model",
    ),
    (
        "Ready but the source changed since (new generation)",
        model({"phase": "Ready", "conditions": [condition("Available", "True", "ModelReady", "ok")]}, 2),
        "Progressing",
        "generation 2",
    ),
]

ROUTER_SERVES = "The router serves at http://gateway-router-proxy.team-a.svc.cluster.local:8080."
#: As llmkube/plan/router/status.py writes them.
ROUTER_CASES = [
    ("no status yet", router(None), "Progressing", "Waiting for the llmkube controller to report status"),
    (
        "Ready",
        router(
            {
                "phase": "Ready",
                "observedGeneration": 1,
                "conditions": [
                    condition("Ready", "True", "Ready", ROUTER_SERVES),
                    condition("Reconciling", "False", "Converged", "The router's Deployment is up to date."),
                ],
            }
        ),
        "Healthy",
        ROUTER_SERVES,
    ),
    (
        "Provisioning: the Deployment has no available replica yet",
        router(
            {
                "phase": "Provisioning",
                "observedGeneration": 1,
                "conditions": [
                    condition(
                        "Ready",
                        "False",
                        "Provisioning",
                        "The router's Deployment has no available replica yet.",
                    ),
                    condition("Reconciling", "True", "RollingOut", "The router's Deployment is rolling out."),
                ],
            }
        ),
        "Progressing",
        "Provisioning: The router's Deployment has no available replica yet.",
    ),
    (
        "Degraded: it serves, a backend is not Ready",
        router(
            {
                "phase": "Degraded",
                "observedGeneration": 1,
                "conditions": [
                    condition(
                        "Ready",
                        "True",
                        "BackendsNotReady",
                        'The router serves; not ready: chat: InferenceService "chat" is Creating',
                    ),
                    condition("Reconciling", "False", "Converged", "The router's Deployment is up to date."),
                ],
            }
        ),
        "Degraded",
        'not ready: chat: InferenceService "chat" is Creating',
    ),
    (
        "Failed: an invalid spec (Stalled)",
        router(
            {
                "phase": "Failed",
                "observedGeneration": 1,
                "conditions": [
                    condition("Ready", "False", "InvalidSpec", 'The spec is invalid: spec.defaultRoute: "x"'),
                    condition(
                        "Reconciling", "False", "InvalidSpec", "Nothing is deployed for an invalid spec."
                    ),
                    condition(
                        "Stalled", "True", "InvalidSpec", 'The spec is invalid: spec.defaultRoute: "x"'
                    ),
                ],
            }
        ),
        "Degraded",
        "The spec is invalid: spec.defaultRoute",
    ),
    (
        "Ready, but the spec changed since",
        router(
            {
                "phase": "Ready",
                "observedGeneration": 1,
                "conditions": [condition("Ready", "True", "Ready", ROUTER_SERVES)],
            },
            generation=2,
        ),
        "Progressing",
        "Waiting for the controller to observe generation 2 (status is for 1)",
    ),
]


def gpuquota(status: dict[str, Any] | None, generation: int = 1) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": API,
        "kind": "GPUQuota",
        "metadata": {"name": "team-a", "namespace": "team-a", "generation": generation},
        "spec": {"namespaceRef": "team-a", "gpuCount": 8},
    }
    if status is not None:
        obj["status"] = status
    return obj


ENFORCED = "6 of 8 GPUs held by 2 services, 1 waiting"
INVALID = (
    "The spec is invalid, nothing is enforced: spec: exactly one of namespaceRef and selector is required"
)
QUOTA_CASES = [
    ("no status yet", gpuquota(None), "Progressing", "Waiting for the llmkube controller"),
    (
        "enforced, services waiting",
        gpuquota(
            {
                "usedGPUCount": 6,
                "waiting": 1,
                "observedGeneration": 1,
                "conditions": [
                    condition("Ready", "True", "Enforced", ENFORCED),
                    condition("Reconciling", "False", "Enforced", ENFORCED),
                ],
            }
        ),
        "Healthy",
        ENFORCED,
    ),
    (
        "invalid spec",
        gpuquota(
            {
                "observedGeneration": 1,
                "conditions": [
                    condition("Ready", "False", "InvalidSpec", INVALID),
                    condition("Stalled", "True", "InvalidSpec", INVALID),
                ],
            }
        ),
        "Degraded",
        "exactly one of namespaceRef and selector",
    ),
    (
        "an older generation's status",
        gpuquota(
            {"observedGeneration": 1, "conditions": [condition("Ready", "True", "Enforced", ENFORCED)]},
            generation=2,
        ),
        "Progressing",
        "observe generation 2",
    ),
]
