"""The semantically-bad corpus: InferenceService specs the contract schema accepts but whose objects
the API server would refuse, or that ask for something that cannot work, each with the field the
user is told about and the start of what they are told.

An "error" makes the service Failed with Degraded=True/InvalidSpec naming `field: message...`, an
InvalidSpec Warning Event with the same text, and nothing applied. A "warning" keeps the service
going and is reported in SpecValid=False/IgnoredSettings and an IgnoredSetting Event.

Used by the pure planner tests (tests/unit/plan/test_isvc_bad_specs.py) and by the end-to-end
corpus against the running controller (tests/e2e/test_bad_spec_corpus.py).
"""

from dataclasses import dataclass
from typing import Any, Literal

QUALIFIED = "name part must consist of alphanumeric characters"
# Label and annotation maps are checked key by key by plan/apiserver/labels.py, in its own words.
LETTERS = "must be letters, digits, '-', '_' or '.', starting and ending alphanumeric"
NAME_PART = f"the name part {LETTERS}"
SUBDOMAIN = "a lowercase RFC 1123 subdomain must consist of"


@dataclass(frozen=True)
class BadSpec:
    case: str
    spec: dict[str, Any]
    field: str
    message: str
    severity: Literal["error", "warning"] = "error"
    model: Literal["cpu", "gpu"] = "cpu"

    @property
    def text(self) -> str:
        """What the condition and the Event say (they may say more after it)."""
        return f"{self.field}: {self.message}"


def probe(**fields: Any) -> dict[str, Any]:
    return {"probeOverrides": {"readiness": fields}}


HTTP = {"httpGet": {"path": "/health", "port": 8080}}

CORPUS: list[BadSpec] = [
    # -- pod labels, annotations, node selector ----------------------------------------------------
    BadSpec("pod label key", {"podLabels": {"a b": "x"}}, "spec.podLabels", f'key "a b": {NAME_PART}'),
    BadSpec(
        "pod label value",
        {"podLabels": {"team": "machine learning"}},
        "spec.podLabels",
        f'value "machine learning" of "team": {LETTERS}',
    ),
    BadSpec(
        "pod label value too long",
        {"podLabels": {"team": "x" * 64}},
        "spec.podLabels",
        f'value "{"x" * 64}" of "team": is 64 characters (at most 63)',
    ),
    BadSpec(
        "pod annotation key", {"podAnnotations": {"-x": "1"}}, "spec.podAnnotations", f'key "-x": {NAME_PART}'
    ),
    BadSpec(
        "pod annotations too large",
        {"podAnnotations": {"big": "x" * (256 * 1024)}},
        "spec.podAnnotations",
        "Too long: may not be more than 262144 bytes",
    ),
    BadSpec(
        "pod deletion cost",
        {"podAnnotations": {"controller.kubernetes.io/pod-deletion-cost": "+1"}},
        "spec.podAnnotations[controller.kubernetes.io/pod-deletion-cost]",
        'Invalid value: "+1": must be a 32bit integer',
    ),
    BadSpec(
        "mirror pod annotation",
        {"podAnnotations": {"kubernetes.io/config.mirror": "x"}},
        "spec.podAnnotations[kubernetes.io/config.mirror]",
        'Invalid value: "x": must set spec.nodeName if mirror pod annotation is set',
    ),
    BadSpec(
        "seccomp annotation profile",
        {"podAnnotations": {"seccomp.security.alpha.kubernetes.io/pod": "strict"}},
        "spec.podAnnotations.seccomp.security.alpha.kubernetes.io/pod",
        'Invalid value: "strict": must be a valid seccomp profile',
    ),
    BadSpec(
        "seccomp annotation against the default profile",
        {"podAnnotations": {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}},
        "spec.podAnnotations[seccomp.security.alpha.kubernetes.io/pod]",
        "Forbidden: seccomp type in annotation and field must match (the field's type is RuntimeDefault)",
    ),
    BadSpec(
        "AppArmor annotation for a container that does not exist",
        {"podAnnotations": {"container.apparmor.security.beta.kubernetes.io/sidecar": "runtime/default"}},
        "spec.podAnnotations[container.apparmor.security.beta.kubernetes.io/sidecar]",
        'Invalid value: "sidecar": container not found',
    ),
    BadSpec(
        "node selector value",
        {"nodeSelector": {"kubernetes.io/arch": "amd 64"}},
        "spec.nodeSelector",
        f'value "amd 64" of "kubernetes.io/arch": {LETTERS}',
    ),
    BadSpec(
        "node selector key",
        {"nodeSelector": {"Example.com/pool": "a"}},
        "spec.nodeSelector",
        'key "Example.com/pool": the prefix must be a lowercase DNS subdomain',
    ),
    # -- tolerations -------------------------------------------------------------------------------
    BadSpec(
        "toleration without key must use Exists",
        {"tolerations": [{"operator": "Equal", "value": "x"}]},
        "spec.tolerations[0].operator",
        'Invalid value: "Equal": operator must be Exists when `key` is empty',
    ),
    BadSpec(
        "tolerationSeconds needs NoExecute",
        {
            "tolerations": [
                {"key": "spot", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}
            ]
        },
        "spec.tolerations[0].effect",
        "Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
    ),
    BadSpec(
        "toleration operator",
        {"tolerations": [{"key": "spot", "operator": "In", "value": "a"}]},
        "spec.tolerations[0].operator",
        'Unsupported value: "In": supported values: "Equal", "Exists"',
    ),
    BadSpec(
        "toleration Exists with a value",
        {"tolerations": [{"key": "spot", "operator": "Exists", "value": "yes"}]},
        "spec.tolerations[0].operator",
        "Invalid value: \"yes\": value must be empty when `operator` is 'Exists'",
    ),
    BadSpec(
        "toleration effect",
        {"tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoRun"}]},
        "spec.tolerations[0].effect",
        'Unsupported value: "NoRun"',
    ),
    BadSpec(
        "toleration of a GPU service (after the generated GPU toleration)",
        {"tolerations": [{"key": "ok", "operator": "Exists"}, {"key": "a b", "operator": "Exists"}]},
        "spec.tolerations[1].key",
        f'Invalid value: "a b": {QUALIFIED}',
        model="gpu",
    ),
    # -- runtime class -----------------------------------------------------------------------------
    BadSpec(
        "runtimeClassName",
        {"runtimeClassName": "Nvidia"},
        "spec.runtimeClassName",
        f'Invalid value: "Nvidia": {SUBDOMAIN}',
    ),
    # -- env -----------------------------------------------------------------------------------------
    BadSpec(
        "env name with '='",
        {"env": [{"name": "A=B", "value": "1"}]},
        "spec.env[0].name",
        'Invalid value: "A=B": a valid environment variable name must consist only of printable ASCII',
    ),
    BadSpec("env name empty", {"env": [{"name": ""}]}, "spec.env[0].name", "Required value"),
    BadSpec(
        "env value and valueFrom",
        {"env": [{"name": "A", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]},
        "spec.env[0].valueFrom",
        'Invalid value: "": may not be specified when `value` is not empty',
    ),
    BadSpec(
        "env valueFrom with no source",
        {"env": [{"name": "A", "valueFrom": {}}]},
        "spec.env[0].valueFrom",
        'Invalid value: "": must specify one of: `fieldRef`, `resourceFieldRef`',
    ),
    BadSpec(
        "env valueFrom with two sources",
        {
            "env": [
                {
                    "name": "A",
                    "valueFrom": {
                        "fieldRef": {"fieldPath": "spec.nodeName"},
                        "secretKeyRef": {"name": "s", "key": "k"},
                    },
                }
            ]
        },
        "spec.env[0].valueFrom",
        'Invalid value: "": may not have more than one field specified at a time',
    ),
    BadSpec(
        "env Secret without a name",
        {"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"key": "token"}}}]},
        "spec.env[0].valueFrom.secretKeyRef.name",
        f'Invalid value: "": {SUBDOMAIN}',
    ),
    BadSpec(
        "env Secret key",
        {"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "a/b"}}}]},
        "spec.env[0].valueFrom.secretKeyRef.key",
        'Invalid value: "a/b": a valid config key must consist of',
    ),
    BadSpec(
        "env ConfigMap name",
        {"env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "My_Config", "key": "k"}}}]},
        "spec.env[0].valueFrom.configMapKeyRef.name",
        f'Invalid value: "My_Config": {SUBDOMAIN}',
    ),
    BadSpec(
        "env fieldPath",
        {"env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.foo"}}}]},
        "spec.env[0].valueFrom.fieldRef.fieldPath",
        'Invalid value: "spec.foo": error converting fieldPath: field label not supported: spec.foo',
    ),
    BadSpec(
        "env fieldPath the downward API does not offer to env",
        {"env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}}]},
        "spec.env[0].valueFrom.fieldRef.fieldPath",
        'Unsupported value: "status.phase"',
    ),
    BadSpec(
        "env resource",
        {"env": [{"name": "A", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}}]},
        "spec.env[0].valueFrom.resourceFieldRef.resource",
        'Unsupported value: "limits.gpu"',
    ),
    BadSpec(
        "env file from a volume that does not exist",
        {
            "env": [
                {"name": "A", "valueFrom": {"fileKeyRef": {"volumeName": "cfg", "path": "a.env", "key": "A"}}}
            ]
        },
        "spec.env[0].valueFrom.fileKeyRef.volumeName",
        'Not found: "cfg"',
    ),
    BadSpec(
        "env names repeated (not a 500 loop)",
        {"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]},
        "spec.env[1].name",
        'Duplicate value: "A"',
    ),
    BadSpec(
        "hfTokenSecretRef without a Secret name",
        {"runtime": "vllm", "vllmConfig": {"hfTokenSecretRef": {"key": "token"}}},
        "spec.vllmConfig.hfTokenSecretRef.name",
        f'Invalid value: "": {SUBDOMAIN}',
    ),
    # -- image pull secrets ----------------------------------------------------------------------
    BadSpec(
        "imagePullSecrets repeated (not a 500 loop)",
        {"imagePullSecrets": [{"name": "regcred"}, {"name": "regcred"}]},
        "spec.imagePullSecrets[1].name",
        'Duplicate value: "regcred"',
    ),
    # -- pod security context ----------------------------------------------------------------------
    BadSpec(
        "pod runAsUser negative",
        {"podSecurityContext": {"runAsUser": -1}},
        "spec.podSecurityContext.runAsUser",
        "Invalid value: -1: must be between 0 and 2147483647, inclusive",
    ),
    BadSpec(
        "sysctl name",
        {"podSecurityContext": {"sysctls": [{"name": "Kernel.Shm", "value": "1"}]}},
        "spec.podSecurityContext.sysctls[0].name",
        'Invalid value: "Kernel.Shm": must have at most 253 characters and match regex',
    ),
    BadSpec(
        "sysctl repeated",
        {
            "podSecurityContext": {
                "sysctls": [
                    {"name": "kernel.shm_rmid_forced", "value": "1"},
                    {"name": "kernel.shm_rmid_forced", "value": "0"},
                ]
            }
        },
        "spec.podSecurityContext.sysctls[1].name",
        'Duplicate value: "kernel.shm_rmid_forced"',
    ),
    BadSpec(
        "fsGroupChangePolicy",
        {"podSecurityContext": {"fsGroupChangePolicy": "Sometimes"}},
        "spec.podSecurityContext.fsGroupChangePolicy",
        'Unsupported value: "Sometimes"',
    ),
    BadSpec(
        "supplementalGroupsPolicy",
        {"podSecurityContext": {"supplementalGroupsPolicy": "Loose"}},
        "spec.podSecurityContext.supplementalGroupsPolicy",
        'Unsupported value: "Loose"',
    ),
    BadSpec(
        "seLinuxChangePolicy",
        {"podSecurityContext": {"seLinuxChangePolicy": "Never"}},
        "spec.podSecurityContext.seLinuxChangePolicy",
        'Unsupported value: "Never"',
    ),
    BadSpec(
        "seccomp Localhost without a profile",
        {"podSecurityContext": {"seccompProfile": {"type": "Localhost"}}},
        "spec.podSecurityContext.seccompProfile.localhostProfile",
        "Required value: must be set when seccomp type is Localhost",
    ),
    BadSpec(
        "seccomp profile outside Localhost",
        {"securityContext": {"seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "p.json"}}},
        "spec.securityContext.seccompProfile.localhostProfile",
        'Invalid value: "p.json": can only be set when seccomp type is Localhost',
    ),
    BadSpec(
        "seccomp profile path",
        {"securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "/etc/p.json"}}},
        "spec.securityContext.seccompProfile.localhostProfile",
        'Invalid value: "/etc/p.json": must be a relative path',
    ),
    BadSpec(
        "AppArmor type",
        {"podSecurityContext": {"appArmorProfile": {"type": "Strict"}}},
        "spec.podSecurityContext.appArmorProfile.type",
        'Unsupported value: "Strict"',
    ),
    BadSpec(
        "Windows user name",
        {"securityContext": {"windowsOptions": {"runAsUserName": "a/b"}}},
        "spec.securityContext.windowsOptions.runAsUserName",
        'Invalid value: "a/b": runAsUserName\'s User cannot contain the following characters',
    ),
    BadSpec(
        "Windows hostProcess without host networking",
        {"securityContext": {"windowsOptions": {"hostProcess": True}}},
        "spec.securityContext.windowsOptions.hostProcess",
        "Invalid value: true: hostNetwork must be true if pod contains any hostProcess containers",
    ),
    # -- container security context ----------------------------------------------------------------
    BadSpec(
        "procMount Unmasked",
        {"securityContext": {"procMount": "Unmasked"}},
        "spec.securityContext.procMount",
        'Invalid value: "Unmasked": `hostUsers` must be false to use `Unmasked`',
    ),
    BadSpec(
        "procMount value",
        {"securityContext": {"procMount": "Hidden"}},
        "spec.securityContext.procMount",
        'Unsupported value: "Hidden": supported values: "Default", "Unmasked"',
    ),
    BadSpec(
        "privileged without privilege escalation",
        {"securityContext": {"privileged": True, "allowPrivilegeEscalation": False}},
        "spec.securityContext.allowPrivilegeEscalation",
        "Invalid value: false: cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
    ),
    BadSpec(
        "CAP_SYS_ADMIN without privilege escalation",
        {"securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"add": ["CAP_SYS_ADMIN"]}}},
        "spec.securityContext.allowPrivilegeEscalation",
        "Invalid value: false: cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` "
        "CAP_SYS_ADMIN",
    ),
    BadSpec(
        "runAsGroup out of range",
        {"securityContext": {"runAsGroup": 2**31}},
        "spec.securityContext.runAsGroup",
        "Invalid value: 2147483648: must be between 0 and 2147483647, inclusive",
    ),
    # -- probes ------------------------------------------------------------------------------------
    BadSpec(
        "probe without a handler",
        probe(periodSeconds=5),
        "spec.probeOverrides.readiness",
        "Required value: must specify a handler type",
    ),
    BadSpec(
        "probe with two handlers",
        probe(httpGet={"port": 8080}, tcpSocket={"port": 8080}),
        "spec.probeOverrides.readiness.tcpSocket",
        "Forbidden: may not specify more than 1 handler type",
    ),
    BadSpec(
        "liveness successThreshold",
        {"probeOverrides": {"liveness": {**HTTP, "successThreshold": 2}}},
        "spec.probeOverrides.liveness.successThreshold",
        "Invalid value: 2: must be 1",
    ),
    BadSpec(
        "readiness terminationGracePeriodSeconds",
        probe(**HTTP, terminationGracePeriodSeconds=10),
        "spec.probeOverrides.readiness.terminationGracePeriodSeconds",
        "Invalid value: 10: must not be set for readinessProbes",
    ),
    BadSpec(
        "probe negative delay",
        probe(**HTTP, initialDelaySeconds=-5),
        "spec.probeOverrides.readiness.initialDelaySeconds",
        "Invalid value: -5: must be greater than or equal to 0",
    ),
    BadSpec(
        "probe port out of range",
        probe(tcpSocket={"port": 70000}),
        "spec.probeOverrides.readiness.tcpSocket.port",
        "Invalid value: 70000: must be between 1 and 65535, inclusive",
    ),
    BadSpec(
        "probe port name",
        probe(httpGet={"port": "HTTP"}),
        "spec.probeOverrides.readiness.httpGet.port",
        'Invalid value: "HTTP": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)',
    ),
    BadSpec(
        "probe scheme",
        probe(httpGet={"port": 8080, "scheme": "FTP"}),
        "spec.probeOverrides.readiness.httpGet.scheme",
        'Unsupported value: "FTP": supported values: "HTTP", "HTTPS"',
    ),
    BadSpec(
        "probe header name",
        probe(httpGet={"port": 8080, "httpHeaders": [{"name": "X Token", "value": "1"}]}),
        "spec.probeOverrides.readiness.httpGet.httpHeaders",
        "Invalid value: \"X Token\": a valid HTTP header must consist of alphanumeric characters or '-'",
    ),
    BadSpec(
        "probe exec without a command",
        probe(exec={"command": []}),
        "spec.probeOverrides.readiness.exec.command",
        "Required value",
    ),
    BadSpec(
        "liveness grace period zero",
        {"probeOverrides": {"liveness": {**HTTP, "terminationGracePeriodSeconds": 0}}},
        "spec.probeOverrides.liveness.terminationGracePeriodSeconds",
        "Invalid value: 0: must be greater than 0",
    ),
    # -- autoscaling -------------------------------------------------------------------------------
    BadSpec(
        "HPA metric no adapter can serve",
        {
            "autoscaling": {
                "maxReplicas": 3,
                "metrics": [{"type": "Pods", "name": "gpu!", "targetAverageValue": "2"}],
            }
        },
        "spec.autoscaling.metrics[0].name",
        '"gpu!" is not a metric name a custom metrics adapter can serve',
    ),
    BadSpec(
        "HPA Resource metric the resource metrics API does not have",
        {
            "autoscaling": {
                "maxReplicas": 3,
                "metrics": [{"type": "Resource", "name": "nvidia.com/gpu", "targetAverageUtilization": 50}],
            }
        },
        "spec.autoscaling.metrics[0].name",
        '"nvidia.com/gpu" is not a resource the resource metrics API serves',
    ),
    BadSpec(
        "HPA target zero",
        {
            "autoscaling": {
                "maxReplicas": 3,
                "metrics": [{"type": "Pods", "name": "q", "targetAverageValue": "0"}],
            }
        },
        "spec.autoscaling.metrics[0].targetAverageValue",
        '"0" must be positive',
    ),
    BadSpec(
        "HPA utilization zero",
        {
            "autoscaling": {
                "maxReplicas": 3,
                "metrics": [{"type": "Resource", "name": "cpu", "targetAverageUtilization": 0}],
            }
        },
        "spec.autoscaling.metrics[0].targetAverageUtilization",
        "0 must be greater than 0",
    ),
    # -- values the reference operator accepted without a word: now said --------------------------
    BadSpec(
        "vLLM tensorParallelSize zero",
        {"runtime": "vllm", "vllmConfig": {"tensorParallelSize": 0}},
        "spec.vllmConfig.tensorParallelSize",
        "0 is ignored: it must be at least 1",
        severity="warning",
    ),
    BadSpec(
        "vLLM maxModelLen negative",
        {"runtime": "vllm", "vllmConfig": {"maxModelLen": -1}},
        "spec.vllmConfig.maxModelLen",
        "-1 is ignored: it must be at least 1",
        severity="warning",
    ),
    BadSpec(
        "TGI maxTotalTokens zero",
        {"runtime": "tgi", "tgiConfig": {"maxTotalTokens": 0}},
        "spec.tgiConfig.maxTotalTokens",
        "0 is ignored: it must be at least 1",
        severity="warning",
    ),
]
