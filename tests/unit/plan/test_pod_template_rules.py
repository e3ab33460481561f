"""Rules of the API server's pod template validation that the corpus (tests/bad_specs.py) does not
reach through an InferenceService field, and what they must accept."""

from typing import Any

import pytest
from isvc_factories import make_isvc
from isvc_planning import plan

from llmkube.plan.apiserver.pod_template_rules import pod_template_errors


def template(spec: dict[str, Any] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    pod = {"containers": [{"name": "main", "image": "img"}], **(spec or {})}
    return {"metadata": {"labels": {"app": "x"}, "annotations": annotations or {}}, "spec": pod}


def messages(found: list[Any]) -> list[str]:
    return [error.text() for error in found]


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "runtime class", "runtimeClassName": "nvidia"},
        {
            "tolerations": [
                {"operator": "Exists"},
                {"key": "a", "value": "b"},
                {"key": "a", "effect": "NoExecute", "tolerationSeconds": 5},
            ]
        },
        {
            "securityContext": {
                "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/a.json"},
                "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1 2"}],
            }
        },
        {
            "volumes": [{"name": "cfg", "emptyDir": {}}],
            "containers": [
                {
                    "name": "main",
                    "image": "img",
                    "env": [
                        {
                            "name": "A",
                            "valueFrom": {"fileKeyRef": {"volumeName": "cfg", "path": "a.env", "key": "A"}},
                        },
                        {
                            "name": "B",
                            "valueFrom": {
                                "fieldRef": {"fieldPath": "metadata.labels['app.kubernetes.io/name']"}
                            },
                        },
                        {
                            "name": "C",
                            "valueFrom": {
                                "resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}
                            },
                        },
                        {
                            "name": "D",
                            "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}},
                        },
                        {"name": "E", "valueFrom": {"fieldRef": {"fieldPath": "spec.host"}}},
                        {"name": "weird but fine: #one", "value": ""},
                    ],
                }
            ],
        },
        {
            "containers": [
                {
                    "name": "main",
                    "image": "img",
                    "livenessProbe": {"grpc": {"port": 9000}},
                    "readinessProbe": {"httpGet": {"port": "http", "path": ""}, "timeoutSeconds": 0},
                    "startupProbe": {"exec": {"command": ["true"]}, "successThreshold": 0},
                }
            ]
        },
    ],
)
def test_what_the_server_accepts_is_accepted(spec: dict[str, Any]) -> None:
    spec = {k: v for k, v in spec.items() if k != "name"}
    assert messages(pod_template_errors(template(spec))) == []


@pytest.mark.parametrize(
    ("spec", "annotations", "expected"),
    [
        (
            {},
            {"scheduler.alpha.kubernetes.io/tolerations": '[{"operator": "Equal"}]'},
            "spec.template.annotations.scheduler.alpha.kubernetes.io/tolerations[0].operator: Invalid value: "
            '"Equal": operator must be Exists',
        ),
        (
            {},
            {"scheduler.alpha.kubernetes.io/tolerations": "not json"},
            "spec.template.annotations: Invalid value: "
            '"scheduler.alpha.kubernetes.io/tolerations": Expecting value',
        ),
        (
            {
                "containers": [
                    {
                        "name": "main",
                        "image": "img",
                        "securityContext": {
                            "seccompProfile": {"type": "Localhost", "localhostProfile": "a.json"}
                        },
                    }
                ]
            },
            {"container.seccomp.security.alpha.kubernetes.io/main": "localhost/b.json"},
            "spec.template.annotations[container.seccomp.security.alpha.kubernetes.io/main]: Forbidden: "
            "seccomp profile in annotation and field must match",
        ),
        (
            {"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}},
            {"container.apparmor.security.beta.kubernetes.io/main": "unconfined"},
            "spec.template.annotations[container.apparmor.security.beta.kubernetes.io/main]: Forbidden: "
            "apparmor type in annotation and field must match",
        ),
        (
            {
                "securityContext": {"windowsOptions": {"hostProcess": True}},
                "containers": [
                    {
                        "name": "main",
                        "image": "img",
                        "securityContext": {"windowsOptions": {"hostProcess": False}},
                    }
                ],
            },
            {},
            "spec.template.spec.containers[0].securityContext.windowsOptions.hostProcess: "
            "Invalid value: false: pod hostProcess value must be identical",
        ),
        (
            {
                "containers": [
                    {
                        "name": "main",
                        "image": "img",
                        "env": [
                            {
                                "name": "A",
                                "valueFrom": {
                                    "resourceFieldRef": {"resource": "requests.cpu", "divisor": "1Mi"}
                                },
                            }
                        ],
                    }
                ]
            },
            {},
            "spec.template.spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor: Invalid value: "
            '"requests.cpu": only divisor\'s values 1m and 1 are supported with the cpu resource',
        ),
        (
            {
                "containers": [
                    {
                        "name": "main",
                        "image": "img",
                        "env": [
                            {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name['x']"}}}
                        ],
                    }
                ]
            },
            {},
            "spec.template.spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Invalid value: "
            "\"metadata.name['x']\": error converting fieldPath: field label does not support subscript",
        ),
        (
            {
                "containers": [
                    {
                        "name": "main",
                        "image": "img",
                        "env": [
                            {
                                "name": "A",
                                "valueFrom": {"fieldRef": {"fieldPath": "metadata.name", "apiVersion": "v2"}},
                            }
                        ],
                    }
                ]
            },
            {},
            "spec.template.spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Invalid value: "
            '"metadata.name": error converting fieldPath: unsupported pod version: v2',
        ),
        (
            {
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}],
                "containers": [
                    {
                        "name": "main",
                        "image": "img",
                        "env": [
                            {
                                "name": "A",
                                "valueFrom": {"fileKeyRef": {"volumeName": "data", "path": "a", "key": "A"}},
                            }
                        ],
                    }
                ],
            },
            {},
            'spec.template.spec.containers[0].env[0].valueFrom.fileKeyRef.volumeName: Invalid value: "data": '
            "referenced volume must be of type emptyDir",
        ),
        (
            {"securityContext": {"windowsOptions": {"runAsUserName": "bad|domain\\user"}}},
            {},
            "spec.template.spec.securityContext.windowsOptions.runAsUserName: "
            'Invalid value: "bad|domain\\\\user": '
            "runAsUserName's Domain doesn't match the NetBios nor the DNS format",
        ),
    ],
)
def test_rules_beyond_the_corpus(spec: dict[str, Any], annotations: dict[str, str], expected: str) -> None:
    found = messages(pod_template_errors(template(spec, annotations)))
    assert any(message.startswith(expected) for message in found), found


def test_odd_shapes_never_raise() -> None:
    for odd in (
        {"containers": "x"},
        {"tolerations": [1, None]},
        {"securityContext": []},
        {"containers": [None]},
    ):
        pod_template_errors({"metadata": [], "spec": odd})


def test_every_golden_and_sample_plan_passes_its_own_checks() -> None:
    """No false alarm on what we know the server accepts (the samples are dry-run on a server)."""
    for spec in (
        {},
        {"runtime": "vllm", "vllmConfig": {"hfTokenSecretRef": {"name": "hf", "key": "token"}}},
        {"runtime": "generic", "image": "i", "probeOverrides": {"readiness": {"tcpSocket": {"port": 8080}}}},
        {"env": [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]},
    ):
        result = plan(isvc=make_isvc(spec))
        assert result.status.phase != "Failed", result.status.conditions
