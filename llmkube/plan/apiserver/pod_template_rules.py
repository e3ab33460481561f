"""What the API server would refuse in the pod template of a Deployment we build: Kubernetes 1.37's
own validation (pkg/apis/core/validation: ValidatePodTemplateSpec, ValidatePodSpec,
validateContainers, ValidateSecurityContext, ValidateTolerations, ValidateEnv...), ported for the
fields an InferenceService can put there, plus what server-side apply refuses before validation
runs (two entries with one key in a keyed list).

The template is checked as the server sees it after defaulting (a probe's zero timeout is 1, an
HTTP probe's empty path is "/"...). Every error carries the path inside the Deployment, e.g.
`spec.template.spec.containers[0].env[2].name`; plan/inferenceservice/field_origins.py maps it to the
InferenceService field it came from. Nothing here raises on any input the contract schema allows.
"""

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from llmkube.apimachinery.quantity import QuantityError, parse_quantity
from llmkube.plan.apiserver.field_errors import (
    FieldError,
    duplicate,
    forbidden,
    invalid,
    invalid_each,
    not_supported,
    required,
    too_long,
)
from llmkube.plan.apiserver.kube_syntax import (
    SYSCTL_FMT,
    SYSCTL_MAX_LENGTH,
    TOTAL_ANNOTATION_SIZE_LIMIT,
    annotations_size,
    config_map_key_errors,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    http_header_name_errors,
    is_sysctl_name,
    label_value_errors,
    path_segment_name_errors,
    port_name_errors,
    port_number_errors,
    qualified_name_errors,
    relaxed_env_var_name_errors,
    unix_id_errors,
)
from llmkube.plan.apiserver.memo import ContentMemo

TEMPLATE = "spec.template"
NEGATIVE = "must be greater than or equal to 0"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
SECCOMP_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")
APPARMOR_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")
PROC_MOUNT_TYPES = ("Default", "Unmasked")
FS_GROUP_CHANGE_POLICIES = ("Always", "OnRootMismatch")
SUPPLEMENTAL_GROUPS_POLICIES = ("Merge", "Strict")
SELINUX_CHANGE_POLICIES = ("MountOption", "Recursive")
HTTP_SCHEMES = ("HTTP", "HTTPS")
ENV_FIELD_PATHS = (
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
)
ENV_RESOURCE_FIELDS = (
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
)
HUGEPAGES_PREFIXES = ("requests.hugepages-", "limits.hugepages-")
MEMORY_DIVISORS = frozenset(
    ["1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"]
)
CPU_DIVISORS = frozenset(["1m", "1"])
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
TOLERATIONS_ANNOTATION = "scheduler.alpha.kubernetes.io/tolerations"
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"
APPARMOR_CONTAINER_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


# -- access that never raises on odd input --------------------------------------------------------


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


# -- the template -------------------------------------------------------------------------------


#: a converged cluster's templates: the checks of an unchanged one are not made again (memo.py)
_CHECKED: ContentMemo[tuple[FieldError, ...]] = ContentMemo(8192)


def pod_template_errors(template: Mapping[str, Any], path: str = TEMPLATE) -> list[FieldError]:
    return list(_CHECKED.get(template, path, lambda: tuple(_pod_template_errors(template, path))))


def _pod_template_errors(template: Mapping[str, Any], path: str) -> list[FieldError]:
    meta = _map(template.get("metadata"))
    spec = _map(template.get("spec"))
    annotations = {str(k): _text(v) for k, v in _map(meta.get("annotations")).items()}
    errors = label_errors(_map(meta.get("labels")), f"{path}.labels")
    errors += annotation_errors(annotations, f"{path}.annotations")
    errors += pod_annotation_errors(annotations, spec, f"{path}.annotations")
    errors += pod_spec_errors(spec, f"{path}.spec")
    errors += annotation_field_match_errors(annotations, spec, f"{path}.annotations")
    return errors


def label_errors(labels: Mapping[str, Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for key, value in labels.items():
        errors += invalid_each(path, key, qualified_name_errors(key))
        errors += invalid_each(path, value, label_value_errors(_text(value)))
    return errors


def annotation_errors(annotations: Mapping[str, str], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for key in annotations:
        # The rule is the label key's, case aside.
        errors += invalid_each(path, key, qualified_name_errors(key.lower()))
    if annotations_size(dict(annotations)) > TOTAL_ANNOTATION_SIZE_LIMIT:
        errors.append(too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return errors


def pod_annotation_errors(
    annotations: Mapping[str, str], spec: Mapping[str, Any], path: str
) -> list[FieldError]:
    """ValidatePodSpecificAnnotations: the annotations the kubelet and the scheduler read."""
    errors: list[FieldError] = []
    if MIRROR_POD_ANNOTATION in annotations and not spec.get("nodeName"):
        errors.append(
            invalid(
                f"{path}[{MIRROR_POD_ANNOTATION}]",
                annotations[MIRROR_POD_ANNOTATION],
                "must set spec.nodeName if mirror pod annotation is set",
            )
        )
    if annotations.get(TOLERATIONS_ANNOTATION):
        try:
            parsed = json.loads(annotations[TOLERATIONS_ANNOTATION])
        except ValueError as error:
            errors.append(invalid(path, TOLERATIONS_ANNOTATION, str(error)))
        else:
            if parsed is not None and not (
                isinstance(parsed, list) and all(isinstance(item, dict) for item in parsed)
            ):
                errors.append(invalid(path, TOLERATIONS_ANNOTATION, "must be a JSON list of tolerations"))
            elif parsed:
                errors += toleration_errors(parsed, f"{path}.{TOLERATIONS_ANNOTATION}")
    if DELETION_COST_ANNOTATION in annotations and not _is_int32(annotations[DELETION_COST_ANNOTATION]):
        errors.append(
            invalid(
                f"{path}[{DELETION_COST_ANNOTATION}]",
                annotations[DELETION_COST_ANNOTATION],
                "must be a 32bit integer",
            )
        )
    for key, value in annotations.items():
        if key == SECCOMP_POD_ANNOTATION or key.startswith(SECCOMP_CONTAINER_PREFIX):
            errors += _seccomp_annotation_errors(value, f"{path}.{key}")
        if key.startswith(APPARMOR_CONTAINER_PREFIX):
            container = key.removeprefix(APPARMOR_CONTAINER_PREFIX)
            if container not in _container_names(spec):
                errors.append(invalid(f"{path}[{key}]", container, "container not found"))
            if value not in ("", "runtime/default", "unconfined") and not value.startswith("localhost/"):
                errors.append(invalid(f"{path}[{key}]", value, f'invalid AppArmor profile name: "{value}"'))
    return errors


def _is_int32(text: str) -> bool:
    """As the server parses the deletion cost: no '+', no leading zeros, base 10, 32 bits."""
    if not text or not (text[0] == "-" or text == "0" or "1" <= text[0] <= "9"):
        return False
    if re.fullmatch(r"-?[0-9]+", text) is None:
        return False
    return INT32_MIN <= int(text) <= INT32_MAX


def _seccomp_annotation_errors(profile: str, path: str) -> list[FieldError]:
    if profile in ("runtime/default", "docker/default", "unconfined"):
        return []
    if profile.startswith("localhost/"):
        return _local_descending_path_errors(profile.removeprefix("localhost/"), path)
    return [invalid(path, profile, "must be a valid seccomp profile")]


def _local_descending_path_errors(target: str, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if target.startswith("/"):
        errors.append(invalid(path, target, "must be a relative path"))
    if ".." in target.split("/"):
        errors.append(invalid(path, target, "must not contain '..'"))
    return errors


# -- the pod spec --------------------------------------------------------------------------------


def _containers(spec: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    return [
        (f"{kind}[{index}]", _map(container))
        for kind in ("initContainers", "containers")
        for index, container in enumerate(_items(spec.get(kind)))
    ]


def _container_names(spec: Mapping[str, Any]) -> set[str]:
    return {_text(container.get("name")) for _, container in _containers(spec)}


def pod_spec_errors(spec: Mapping[str, Any], path: str) -> list[FieldError]:
    errors = label_errors(_map(spec.get("nodeSelector")), f"{path}.nodeSelector")
    errors += pod_security_context_errors(_map(spec.get("securityContext")), f"{path}.securityContext")
    errors += keyed_list_errors(_items(spec.get("imagePullSecrets")), "name", f"{path}.imagePullSecrets")
    errors += toleration_errors(_items(spec.get("tolerations")), f"{path}.tolerations")
    for field in ("priorityClassName", "runtimeClassName"):
        if field in spec and (field == "runtimeClassName" or spec[field]):
            errors += invalid_each(
                f"{path}.{field}", spec[field], dns1123_subdomain_errors(_text(spec[field]))
            )
    volumes = {_text(_map(v).get("name")): _map(v) for v in _items(spec.get("volumes"))}
    errors += keyed_list_errors(_items(spec.get("volumes")), "name", f"{path}.volumes")
    for where, container in _containers(spec):
        container_path = f"{path}.{where}"
        errors += container_errors(container, container_path, volumes)
        if where.startswith("containers"):
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                if isinstance(container.get(probe), Mapping):
                    errors += probe_errors(container[probe], probe, f"{container_path}.{probe}")
    errors += windows_host_process_errors(spec, path)
    return errors


def keyed_list_errors(items: list[Any], key: str, path: str) -> list[FieldError]:
    """Server-side apply refuses a keyed list (`x-kubernetes-list-type: map`) with two entries of one
    key before any validation (with a 500, not a 422): reported like the server's Duplicate."""
    seen: set[Any] = set()
    errors: list[FieldError] = []
    for index, item in enumerate(items):
        value = _map(item).get(key, "")  # a name the schema defaults to ""
        if value in seen:
            errors.append(duplicate(f"{path}[{index}].{key}", value))
        seen.add(value if isinstance(value, str | int) else repr(value))
    return errors


def toleration_errors(tolerations: Iterable[Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for index, raw in enumerate(tolerations):
        toleration = _map(raw)
        at = f"{path}[{index}]"
        key, operator = _text(toleration.get("key")), _text(toleration.get("operator"))
        value, effect = _text(toleration.get("value")), _text(toleration.get("effect"))
        if key:
            errors += invalid_each(f"{at}.key", key, qualified_name_errors(key))
        if not key and operator != "Exists":
            errors.append(
                invalid(
                    f"{at}.operator",
                    operator,
                    "operator must be Exists when `key` is empty, which means "
                    '"match all values and all keys"',
                )
            )
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            errors.append(
                invalid(f"{at}.effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set")
            )
        if operator in ("Equal", ""):
            problems = label_value_errors(value)
            if problems:
                errors.append(invalid(f"{at}.operator", value, ";".join(problems)))
        elif operator == "Exists":
            if value:
                errors.append(
                    invalid(f"{at}.operator", value, "value must be empty when `operator` is 'Exists'")
                )
        else:
            errors.append(not_supported(f"{at}.operator", operator, ("Equal", "Exists")))
        if effect and effect not in TAINT_EFFECTS:
            errors.append(not_supported(f"{at}.effect", effect, TAINT_EFFECTS))
    return errors


# -- security contexts ---------------------------------------------------------------------------


def _id_errors(context: Mapping[str, Any], fields: Iterable[str], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for field in fields:
        if isinstance(context.get(field), int):
            errors += invalid_each(f"{path}.{field}", context[field], unix_id_errors(context[field]))
    return errors


def pod_security_context_errors(context: Mapping[str, Any], path: str) -> list[FieldError]:
    errors = _id_errors(context, ("fsGroup", "runAsUser", "runAsGroup"), path)
    for index, group in enumerate(_items(context.get("supplementalGroups"))):
        if isinstance(group, int):
            errors += invalid_each(f"{path}.supplementalGroups[{index}]", group, unix_id_errors(group))
    names: set[str] = set()
    for index, raw in enumerate(_items(context.get("sysctls"))):
        name = _text(_map(raw).get("name"))
        at = f"{path}.sysctls[{index}].name"
        if not name:
            errors.append(required(at))
        elif not is_sysctl_name(name):
            errors.append(
                invalid(
                    at,
                    name,
                    f"must have at most {SYSCTL_MAX_LENGTH} characters and match regex ^{SYSCTL_FMT}$",
                )
            )
        elif name in names:
            errors.append(duplicate(at, name))
        names.add(name)
    for field, allowed in (
        ("fsGroupChangePolicy", FS_GROUP_CHANGE_POLICIES),
        ("supplementalGroupsPolicy", SUPPLEMENTAL_GROUPS_POLICIES),
        ("seLinuxChangePolicy", SELINUX_CHANGE_POLICIES),
    ):
        if field in context and context[field] not in allowed:
            errors.append(not_supported(f"{path}.{field}", context[field], allowed))
    errors += seccomp_profile_errors(context.get("seccompProfile"), f"{path}.seccompProfile")
    errors += windows_options_errors(context.get("windowsOptions"), f"{path}.windowsOptions")
    errors += apparmor_profile_errors(context.get("appArmorProfile"), f"{path}.appArmorProfile")
    return errors


def container_security_context_errors(context: Mapping[str, Any], path: str) -> list[FieldError]:
    """ValidateSecurityContext for a pod that shares the host's user namespace (we never set
    `hostUsers: false`), on a cluster that allows privileged containers."""
    errors = _id_errors(context, ("runAsUser", "runAsGroup"), path)
    if "procMount" in context:
        proc_mount = context["procMount"]
        if proc_mount not in PROC_MOUNT_TYPES:
            errors.append(not_supported(f"{path}.procMount", proc_mount, PROC_MOUNT_TYPES))
        if proc_mount == "Unmasked":
            errors.append(
                invalid(f"{path}.procMount", proc_mount, "`hostUsers` must be false to use `Unmasked`")
            )
    errors += seccomp_profile_errors(context.get("seccompProfile"), f"{path}.seccompProfile")
    if context.get("allowPrivilegeEscalation") is False:
        if context.get("privileged") is True:
            errors.append(
                invalid(
                    f"{path}.allowPrivilegeEscalation",
                    False,
                    "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
                )
            )
        if "CAP_SYS_ADMIN" in _items(_map(context.get("capabilities")).get("add")):
            errors.append(
                invalid(
                    f"{path}.allowPrivilegeEscalation",
                    False,
                    "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
                )
            )
    errors += windows_options_errors(context.get("windowsOptions"), f"{path}.windowsOptions")
    errors += apparmor_profile_errors(context.get("appArmorProfile"), f"{path}.appArmorProfile")
    return errors


def seccomp_profile_errors(raw: Any, path: str) -> list[FieldError]:
    if not isinstance(raw, Mapping):
        return []
    kind, profile = _text(raw.get("type")), raw.get("localhostProfile")
    errors: list[FieldError] = []
    if not kind:
        errors.append(required(f"{path}.type", "type is required when seccompProfile is set"))
    elif kind not in SECCOMP_TYPES:
        errors.append(not_supported(f"{path}.type", kind, SECCOMP_TYPES))
    if kind == "Localhost":
        if profile is None:
            errors.append(required(f"{path}.localhostProfile", "must be set when seccomp type is Localhost"))
        else:
            errors += _local_descending_path_errors(_text(profile), f"{path}.localhostProfile")
    elif profile is not None:
        errors.append(
            invalid(f"{path}.localhostProfile", profile, "can only be set when seccomp type is Localhost")
        )
    return errors


def apparmor_profile_errors(raw: Any, path: str) -> list[FieldError]:
    if not isinstance(raw, Mapping):
        return []
    kind, profile = _text(raw.get("type")), raw.get("localhostProfile")
    if kind == "Localhost":
        if profile is None:
            return [required(f"{path}.localhostProfile", "must be set when AppArmor type is Localhost")]
        text = _text(profile)
        errors: list[FieldError] = []
        if text.strip() != text:
            errors.append(invalid(f"{path}.localhostProfile", text, "must not be padded with whitespace"))
        elif not text:
            errors.append(required(f"{path}.localhostProfile", "must be set when AppArmor type is Localhost"))
        if len(text.encode()) > 4095:
            errors.append(too_long(f"{path}.localhostProfile", 4095))
        return errors
    if kind in ("RuntimeDefault", "Unconfined"):
        if profile is not None:
            return [
                invalid(
                    f"{path}.localhostProfile", profile, "can only be set when AppArmor type is Localhost"
                )
            ]
        return []
    if not kind:
        return [required(f"{path}.type", "type is required when appArmorProfile is set")]
    return [not_supported(f"{path}.type", kind, APPARMOR_TYPES)]


_NETBIOS = re.compile(r'[^\\/:*?"<>|.][^\\/:*?"<>|]{0,14}')
_WINDOWS_DNS = re.compile(
    r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*"
)
_BAD_USER_CHARS = re.compile(r'["/\\:;|=,+*?<>@\[\]]')


def windows_options_errors(raw: Any, path: str) -> list[FieldError]:
    if not isinstance(raw, Mapping):
        return []
    errors: list[FieldError] = []
    if raw.get("gmsaCredentialSpecName") is not None:
        name = raw["gmsaCredentialSpecName"]
        errors += invalid_each(f"{path}.gmsaCredentialSpecName", name, dns1123_subdomain_errors(_text(name)))
    if raw.get("gmsaCredentialSpec") is not None:
        spec = _text(raw["gmsaCredentialSpec"])
        if not spec:
            errors.append(
                invalid(f"{path}.gmsaCredentialSpec", spec, "gmsaCredentialSpec cannot be an empty string")
            )
        elif len(spec.encode()) > 64 * 1024:
            errors.append(
                invalid(f"{path}.gmsaCredentialSpec", spec, "gmsaCredentialSpec size must be under 64 KiB")
            )
    if raw.get("runAsUserName") is not None:
        errors += [invalid(f"{path}.runAsUserName", raw["runAsUserName"], m) for m in _run_as_user_name(raw)]
    return errors


def _run_as_user_name(raw: Mapping[str, Any]) -> list[str]:
    name = _text(raw.get("runAsUserName"))
    if not name:
        return ["runAsUserName cannot be an empty string"]
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in name):
        return ["runAsUserName cannot contain control characters"]
    parts = name.split("\\")
    if len(parts) > 2:
        return ["runAsUserName cannot contain more than one backslash"]
    domain, user = (parts[0], parts[1]) if len(parts) == 2 else ("", parts[0])
    problems: list[str] = []
    if len(domain.encode()) >= 256:
        problems.append("runAsUserName's Domain length must be under 256 characters")
    if len(parts) == 2 and not (_NETBIOS.fullmatch(domain) or _WINDOWS_DNS.fullmatch(domain)):
        problems.append("runAsUserName's Domain doesn't match the NetBios nor the DNS format")
    if not user:
        problems.append("runAsUserName's User cannot be empty")
    elif len(user.encode()) > 104:
        problems.append("runAsUserName's User length must not be longer than 104 characters")
    if re.fullmatch(r"[. ]+", user):
        problems.append("runAsUserName's User cannot contain only periods or spaces")
    if _BAD_USER_CHARS.search(user):
        problems.append("runAsUserName's User cannot contain the following characters: \"/\\:;|=,+*?<>@[]")
    return problems


def windows_host_process_errors(spec: Mapping[str, Any], path: str) -> list[FieldError]:
    """A hostProcess container needs `hostNetwork: true`, which our pods never have, and then every
    container must be one. Reported at the hostProcess field that asked for it."""
    pod_path = f"{path}.securityContext.windowsOptions.hostProcess"
    pod_value = _map(_map(spec.get("securityContext")).get("windowsOptions")).get("hostProcess")
    errors: list[FieldError] = []
    asked: list[str] = [pod_path] if pod_value is True else []
    containers = _containers(spec)
    host_process = 0
    for where, container in containers:
        value = _map(_map(container.get("securityContext")).get("windowsOptions")).get("hostProcess")
        at = f"{path}.{where}.securityContext.windowsOptions.hostProcess"
        if isinstance(pod_value, bool) and isinstance(value, bool) and pod_value != value:
            detail = (
                f"pod hostProcess value must be identical if both are specified, was {show_bool(pod_value)}"
            )
            errors.append(invalid(at, value, detail))
        if value is True:
            asked.append(at)
        if value is True or (value is None and pod_value is True):
            host_process += 1
    if host_process:
        if host_process != len(containers):
            detail = (
                "If pod contains any hostProcess containers then all containers must be "
                + "HostProcess containers"
            )
            errors.append(invalid(asked[0], True, detail))
        if not spec.get("hostNetwork"):
            detail = "hostNetwork must be true if pod contains any hostProcess containers (it never is here)"
            errors += [invalid(at, True, detail) for at in asked]
    return errors


def show_bool(value: bool) -> str:
    return "true" if value else "false"


def annotation_field_match_errors(
    annotations: Mapping[str, str], spec: Mapping[str, Any], path: str
) -> list[FieldError]:
    """Where a deprecated seccomp or AppArmor annotation and the field both say something, they must
    say the same (validateSeccompAnnotationsAndFields, validateAppArmorAnnotationsAndFieldsMatchOnCreate).
    The server names the field; reported here at the annotation (`path` is the annotations' path),
    which is what the user wrote: the field may well be the controller's default."""
    errors: list[FieldError] = []
    pod_context = _map(spec.get("securityContext"))
    pod_seccomp = pod_context.get("seccompProfile")
    if isinstance(pod_seccomp, Mapping) and SECCOMP_POD_ANNOTATION in annotations:
        errors += _profile_match(
            "seccomp", annotations[SECCOMP_POD_ANNOTATION], pod_seccomp, path, SECCOMP_POD_ANNOTATION
        )
    windows = _text(_map(spec.get("os")).get("name")) == "windows"
    pod_apparmor = pod_context.get("appArmorProfile")
    for _, container in _containers(spec):
        name = _text(container.get("name"))
        context = _map(container.get("securityContext"))
        seccomp = context.get("seccompProfile")
        key = SECCOMP_CONTAINER_PREFIX + name
        if isinstance(seccomp, Mapping) and key in annotations:
            errors += _profile_match("seccomp", annotations[key], seccomp, path, key)
        own = context.get("appArmorProfile")
        apparmor = own if isinstance(own, Mapping) else pod_apparmor
        key = APPARMOR_CONTAINER_PREFIX + name
        if not windows and isinstance(apparmor, Mapping) and key in annotations:
            errors += _profile_match("apparmor", annotations[key], apparmor, path, key)
    return errors


def _profile_match(
    what: str, annotation: str, field: Mapping[str, Any], path: str, key: str
) -> list[FieldError]:
    kind = _text(field.get("type"))
    defaults = ("runtime/default", "docker/default") if what == "seccomp" else ("runtime/default",)
    at = f"{path}[{key}]"
    mismatch = [forbidden(at, f"{what} type in annotation and field must match (the field's type is {kind})")]
    if kind == "Unconfined":
        return [] if annotation == "unconfined" else mismatch
    if kind == "RuntimeDefault":
        return [] if annotation in defaults else mismatch
    if kind == "Localhost":
        if not annotation.startswith("localhost/"):
            return mismatch
        profile = field.get("localhostProfile")
        if profile is None or annotation.removeprefix("localhost/") != profile:
            return [
                forbidden(at, f"{what} profile in annotation and field must match (the field's is {profile})")
            ]
    return []


# -- containers ----------------------------------------------------------------------------------


def container_errors(
    container: Mapping[str, Any], path: str, volumes: Mapping[str, Mapping[str, Any]]
) -> list[FieldError]:
    errors: list[FieldError] = []
    if not _text(container.get("image")):
        errors.append(required(f"{path}.image"))
    env = _items(container.get("env"))
    errors += keyed_list_errors(env, "name", f"{path}.env")
    for index, raw in enumerate(env):
        errors += env_var_errors(_map(raw), f"{path}.env[{index}]", volumes)
    if isinstance(container.get("securityContext"), Mapping):
        errors += container_security_context_errors(container["securityContext"], f"{path}.securityContext")
    return errors


def env_var_errors(
    var: Mapping[str, Any], path: str, volumes: Mapping[str, Mapping[str, Any]]
) -> list[FieldError]:
    name = _text(var.get("name"))
    errors = (
        [required(f"{path}.name")]
        if not name
        else invalid_each(f"{path}.name", name, relaxed_env_var_name_errors(name))
    )
    source = var.get("valueFrom")
    if not isinstance(source, Mapping):
        return errors
    at = f"{path}.valueFrom"
    sources = [
        kind
        for kind in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef", "fileKeyRef")
        if source.get(kind) is not None
    ]
    if "fieldRef" in sources:
        errors += _field_ref_errors(_map(source["fieldRef"]), f"{at}.fieldRef")
    if "resourceFieldRef" in sources:
        errors += _resource_field_ref_errors(_map(source["resourceFieldRef"]), f"{at}.resourceFieldRef")
    for kind in ("configMapKeyRef", "secretKeyRef"):
        if kind in sources:
            errors += key_selector_errors(_map(source[kind]), f"{at}.{kind}")
    if "fileKeyRef" in sources:
        errors += _file_key_ref_errors(_map(source["fileKeyRef"]), f"{at}.fileKeyRef", volumes)
    if not sources:
        errors.append(
            invalid(
                at,
                "",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` "
                "or `fileKeyRef`",
            )
        )
    elif _text(var.get("value")):
        errors.append(invalid(at, "", "may not be specified when `value` is not empty"))
    elif len(sources) > 1:
        errors.append(invalid(at, "", "may not have more than one field specified at a time"))
    return errors


def key_selector_errors(selector: Mapping[str, Any], path: str) -> list[FieldError]:
    """A ConfigMap or Secret key reference: a Secret's name and a config key."""
    name, key = _text(selector.get("name")), _text(selector.get("key"))
    errors = invalid_each(f"{path}.name", name, dns1123_subdomain_errors(name))
    if not key:
        errors.append(required(f"{path}.key"))
    else:
        errors += invalid_each(f"{path}.key", key, config_map_key_errors(key))
    return errors


#: fieldPath values the server's conversion accepts (`spec.host` is an old name of spec.nodeName)
_CONVERTIBLE_FIELD_PATHS = (
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.serviceAccountName",
    "spec.schedulerName",
    "status.phase",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
    "spec.host",
)


def _field_ref_errors(selector: Mapping[str, Any], path: str) -> list[FieldError]:
    # The server defaults apiVersion to v1 before validating; no other version has field paths.
    api_version = _text(selector.get("apiVersion")) or "v1"
    field_path = _text(selector.get("fieldPath"))
    if not field_path:
        return [required(f"{path}.fieldPath")]
    at = f"{path}.fieldPath"
    if api_version != "v1":
        return [
            invalid(at, field_path, f"error converting fieldPath: unsupported pod version: {api_version}")
        ]
    subscripted = _split_subscript(field_path)
    if subscripted is not None:
        base, subscript = subscripted
        if base not in ("metadata.annotations", "metadata.labels"):
            detail = f"error converting fieldPath: field label does not support subscript: {field_path}"
            return [invalid(at, field_path, detail)]
        key = subscript.lower() if base == "metadata.annotations" else subscript
        return invalid_each(path, key, qualified_name_errors(key))
    if field_path not in _CONVERTIBLE_FIELD_PATHS:
        return [
            invalid(at, field_path, f"error converting fieldPath: field label not supported: {field_path}")
        ]
    internal = "spec.nodeName" if field_path == "spec.host" else field_path
    if internal not in ENV_FIELD_PATHS:
        return [not_supported(at, internal, ENV_FIELD_PATHS)]
    return []


def _split_subscript(field_path: str) -> tuple[str, str] | None:
    """`metadata.labels['key']` -> ("metadata.labels", "key"), as fieldpath.SplitMaybeSubscriptedPath."""
    if not field_path.endswith("']"):
        return None
    base, separator, subscript = field_path[:-2].partition("['")
    return (base, subscript) if separator and base else None


_SIZE_DIVISORS = "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei"
_DIVISORS = (
    ((".cpu",), CPU_DIVISORS, "only divisor's values 1m and 1 are supported with the cpu resource"),
    (
        (".memory",),
        MEMORY_DIVISORS,
        f"{_SIZE_DIVISORS} are supported with the memory resource",
    ),
    (
        (".ephemeral-storage",),
        MEMORY_DIVISORS,
        f"{_SIZE_DIVISORS} are supported with the local ephemeral storage resource",
    ),
)


def _resource_field_ref_errors(selector: Mapping[str, Any], path: str) -> list[FieldError]:
    resource = _text(selector.get("resource"))
    errors: list[FieldError] = []
    if not resource:
        errors.append(required(f"{path}.resource"))
    elif resource not in ENV_RESOURCE_FIELDS and not resource.startswith(HUGEPAGES_PREFIXES):
        errors.append(not_supported(f"{path}.resource", resource, ENV_RESOURCE_FIELDS))
    divisor = selector.get("divisor")
    if divisor is None:
        return errors
    try:
        parsed = parse_quantity(str(divisor))
    except QuantityError:
        # The server cannot even decode the Deployment (a 400, before validation).
        return [
            *errors,
            invalid(
                f"{path}.divisor",
                divisor,
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ),
        ]
    if parsed.value == 0:
        return errors  # unset
    canonical = parsed.canonical()
    for suffixes, allowed, message in _DIVISORS:
        if (
            resource.startswith(("limits", "requests"))
            and resource.endswith(suffixes)
            and canonical not in allowed
        ):
            errors.append(invalid(f"{path}.divisor", resource, message))
    if resource.startswith(HUGEPAGES_PREFIXES) and canonical not in MEMORY_DIVISORS:
        errors.append(
            invalid(
                f"{path}.divisor",
                resource,
                f"{_SIZE_DIVISORS} are supported with the hugepages resource",
            )
        )
    return errors


def _file_key_ref_errors(
    selector: Mapping[str, Any], path: str, volumes: Mapping[str, Mapping[str, Any]]
) -> list[FieldError]:
    key, volume, file_path = (_text(selector.get(f)) for f in ("key", "volumeName", "path"))
    errors: list[FieldError] = []
    if not key:
        errors.append(required(f"{path}.key"))
    else:
        errors += invalid_each(f"{path}.key", key, relaxed_env_var_name_errors(key))
    if not volume:
        errors.append(required(f"{path}.volumeName"))
    else:
        errors += invalid_each(f"{path}.volumeName", volume, dns1123_label_errors(volume))
    if not file_path:
        errors.append(required(f"{path}.path"))
    elif ".." in file_path.split("/"):
        errors.append(invalid(f"{path}.path", file_path, "must not contain '..'"))
    if volume not in volumes:
        errors.append(FieldError(f"{path}.volumeName", f"Not found: {json.dumps(volume)}"))
    elif "emptyDir" not in volumes[volume]:
        errors.append(invalid(f"{path}.volumeName", volume, "referenced volume must be of type emptyDir"))
    return errors


# -- probes --------------------------------------------------------------------------------------


def probe_errors(probe: Mapping[str, Any], kind: str, path: str) -> list[FieldError]:
    """validateProbe after the server's defaults (zero timeouts, periods and thresholds become
    1, 10, 1 and 3)."""
    errors = handler_errors(probe, path)
    for field in (
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ):
        value = _int(probe.get(field))
        if value < 0:
            errors.append(invalid(f"{path}.{field}", value, NEGATIVE))
    grace = probe.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and grace <= 0:
        errors.append(invalid(f"{path}.terminationGracePeriodSeconds", grace, "must be greater than 0"))
    success = _int(probe.get("successThreshold")) or 1
    if kind in ("livenessProbe", "startupProbe") and success != 1:
        errors.append(invalid(f"{path}.successThreshold", success, "must be 1"))
    if kind == "readinessProbe" and grace is not None:
        errors.append(
            invalid(f"{path}.terminationGracePeriodSeconds", grace, "must not be set for readinessProbes")
        )
    return errors


def handler_errors(probe: Mapping[str, Any], path: str) -> list[FieldError]:
    present = [kind for kind in ("exec", "httpGet", "tcpSocket", "grpc") if probe.get(kind) is not None]
    if not present:
        return [required(path, "must specify a handler type")]
    errors = [forbidden(f"{path}.{kind}", "may not specify more than 1 handler type") for kind in present[1:]]
    kind = present[0]
    action, at = _map(probe[kind]), f"{path}.{kind}"
    if kind == "exec" and not _items(action.get("command")):
        errors.append(required(f"{at}.command"))
    elif kind == "httpGet":
        errors += port_errors(action.get("port"), f"{at}.port")
        scheme = _text(action.get("scheme")) or "HTTP"
        if scheme not in HTTP_SCHEMES:
            errors.append(not_supported(f"{at}.scheme", scheme, HTTP_SCHEMES))
        for header in _items(action.get("httpHeaders")):
            name = _text(_map(header).get("name"))
            errors += invalid_each(f"{at}.httpHeaders", name, http_header_name_errors(name))
    elif kind == "tcpSocket":
        errors += port_errors(action.get("port"), f"{at}.port")
    elif kind == "grpc":
        port = _int(action.get("port"))
        errors += invalid_each(f"{at}.port", port, port_number_errors(port))
    return errors


def port_errors(port: Any, path: str) -> list[FieldError]:
    """ValidatePortNumOrName: a number in 1..65535 or an IANA service name."""
    if isinstance(port, str):
        return invalid_each(path, port, port_name_errors(port))
    number = _int(port)
    return invalid_each(path, number, port_number_errors(number))


def metric_name_errors(name: str, path: str) -> list[FieldError]:
    if not name:
        return [required(path, "must specify a metric name")]
    return invalid_each(path, name, path_segment_name_errors(name))
