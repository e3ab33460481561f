"""Pod templates, one change each from a pod that meets Pod Security "restricted", with the checks
each level must report. Shared by the unit test of the port (tests/unit/plan/test_pod_security.py)
and the test that asks the API server's own PodSecurity admission the same questions
(tests/integration/test_pod_security_on_server.py): both must agree on every case."""

import copy
from typing import Any

RESTRICTED_POD: dict[str, Any] = {
    "metadata": {"labels": {"app": "case"}},
    "spec": {
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "initContainers": [
            {
                "name": "init",
                "image": "registry.local/init:1",
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            }
        ],
        "containers": [
            {
                "name": "server",
                "image": "registry.local/server:1",
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            }
        ],
        "volumes": [{"name": "tmp", "emptyDir": {}}],
    },
}


def template_with(change: dict[str, Any]) -> dict[str, Any]:
    """RESTRICTED_POD with `change` merged in: `pod` merges into the pod's securityContext (`pod!`
    replaces it), `containers`/`initContainers` entries merge into the container of that index
    (their `securityContext` key by key), `annotations` into the metadata, anything else replaces
    the pod spec's field of that name."""
    template = copy.deepcopy(RESTRICTED_POD)
    spec = template["spec"]
    for key, value in change.items():
        if key == "pod":
            spec["securityContext"] = {**spec["securityContext"], **value}
        elif key == "pod!":
            spec["securityContext"] = dict(value)
        elif key in ("containers", "initContainers"):
            for index, patch in enumerate(value):
                container = spec[key][index]
                for field, field_value in patch.items():
                    if field == "securityContext":
                        container[field] = {**container.get(field, {}), **field_value}
                    else:
                        container[field] = field_value
        elif key == "annotations":
            template["metadata"]["annotations"] = value
        else:
            spec[key] = value
    return template


# (name, change, baseline checks that fail, restricted checks that fail)
CASES: list[tuple[str, dict[str, Any], set[str], set[str]]] = [
    (
        # (allowPrivilegeEscalation false next to privileged is invalid: the API server refuses it.)
        "privileged",
        {"containers": [{"securityContext": {"privileged": True, "allowPrivilegeEscalation": None}}]},
        {"privileged"},
        {"privileged", "allowPrivilegeEscalation"},
    ),
    ("host network", {"hostNetwork": True}, {"hostNamespaces"}, {"hostNamespaces"}),
    ("host PID and IPC", {"hostPID": True, "hostIPC": True}, {"hostNamespaces"}, {"hostNamespaces"}),
    (
        "SYS_ADMIN added",
        {"containers": [{"securityContext": {"capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}}]},
        {"capabilities_baseline"},
        {"capabilities_restricted"},
    ),
    (
        "a default capability added",
        {"containers": [{"securityContext": {"capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}}}]},
        set(),
        {"capabilities_restricted"},
    ),
    (
        "NET_BIND_SERVICE added",
        {
            "containers": [
                {"securityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}
            ]
        },
        set(),
        set(),
    ),
    (
        "capabilities not dropped",
        {"containers": [{"securityContext": {"capabilities": {}}}]},
        set(),
        {"capabilities_restricted"},
    ),
    (
        "hostPath volume",
        {"volumes": [{"name": "host", "hostPath": {"path": "/etc/shadow", "type": "File"}}]},
        {"hostPathVolumes"},
        {"restrictedVolumes"},
    ),
    (
        "nfs volume",
        {"volumes": [{"name": "share", "nfs": {"server": "nfs.local", "path": "/x"}}]},
        set(),
        {"restrictedVolumes"},
    ),
    (
        "host port",
        {"containers": [{"ports": [{"containerPort": 8080, "hostPort": 8080}]}]},
        {"hostPorts"},
        {"hostPorts"},
    ),
    (
        "AppArmor unconfined (field)",
        {"pod": {"appArmorProfile": {"type": "Unconfined"}}},
        {"appArmorProfile"},
        {"appArmorProfile"},
    ),
    (
        "AppArmor unconfined (annotation)",
        {"annotations": {"container.apparmor.security.beta.kubernetes.io/server": "unconfined"}},
        {"appArmorProfile"},
        {"appArmorProfile"},
    ),
    (
        "SELinux type",
        {"containers": [{"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}]},
        {"seLinuxOptions"},
        {"seLinuxOptions"},
    ),
    (
        "SELinux user",
        {"pod": {"seLinuxOptions": {"user": "system_u"}}},
        {"seLinuxOptions"},
        {"seLinuxOptions"},
    ),
    (
        # The API server allows Unmasked only in a pod's own user namespace, where baseline allows it.
        "proc mount unmasked",
        {"hostUsers": False, "containers": [{"securityContext": {"procMount": "Unmasked"}}]},
        set(),
        {"procMount_restricted"},
    ),
    (
        "seccomp unconfined (pod)",
        {"pod": {"seccompProfile": {"type": "Unconfined"}}},
        {"seccompProfile_baseline"},
        {"seccompProfile_restricted"},
    ),
    (
        "seccomp unconfined (container)",
        {"containers": [{"securityContext": {"seccompProfile": {"type": "Unconfined"}}}]},
        {"seccompProfile_baseline"},
        {"seccompProfile_restricted"},
    ),
    (
        "unsafe sysctl",
        {"pod": {"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]}},
        {"sysctls"},
        {"sysctls"},
    ),
    ("safe sysctl", {"pod": {"sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]}}, set(), set()),
    (
        "probe host",
        {"containers": [{"readinessProbe": {"httpGet": {"host": "10.0.0.1", "path": "/", "port": 8080}}}]},
        {"hostProbesAndHostLifecycle"},
        {"hostProbesAndHostLifecycle"},
    ),
    (
        "privilege escalation allowed",
        {"containers": [{"securityContext": {"allowPrivilegeEscalation": True}}]},
        set(),
        {"allowPrivilegeEscalation"},
    ),
    (
        "privilege escalation unset in the init container",
        {"initContainers": [{"securityContext": {"allowPrivilegeEscalation": None}}]},
        set(),
        {"allowPrivilegeEscalation"},
    ),
    ("runAsNonRoot false", {"pod": {"runAsNonRoot": False}}, set(), {"runAsNonRoot"}),
    ("runAsUser 0", {"pod": {"runAsUser": 0}}, set(), {"runAsUser"}),
    (
        "runAsUser 0 in a container",
        {"containers": [{"securityContext": {"runAsUser": 0}}]},
        set(),
        {"runAsUser"},
    ),
    (
        "no seccomp profile anywhere",
        {"pod!": {"runAsNonRoot": True, "runAsUser": 65532}},
        set(),
        {"seccompProfile_restricted"},
    ),
]
