"""The Pod Security Standards, as the API server's PodSecurity admission enforces them (Kubernetes
1.37, `k8s.io/pod-security-admission/policy` at its latest version), ported for the pod templates
the controller builds.

The controller must never create a pod that the namespace's `pod-security.kubernetes.io/enforce`
level would refuse (the ReplicaSet would fail to create it, over and over), nor one above the level
the operator allows (`--max-pod-security`). `violations(template, level)` returns what the template
does that `level` forbids, each with the paths of the offending fields inside the Deployment, so the
planner can name the InferenceService field it came from (plan/inferenceservice/field_origins.py);
`meets` is the yes/no form.

The checks, by the lowest level that forbids them:
- baseline: Windows HostProcess, host namespaces, privileged containers, capabilities beyond the
  default set, hostPath volumes, host ports, AppArmor `Unconfined`, SELinux types and user/role,
  a non-default /proc mount, seccomp `Unconfined`, sysctls outside the safe set, probe and lifecycle
  hosts;
- restricted: privilege escalation allowed, capabilities not dropping ALL (only NET_BIND_SERVICE
  may be added), volume types other than configMap, csi, downwardAPI, emptyDir, ephemeral, image,
  persistentVolumeClaim, projected and secret, runAsNonRoot not true, runAsUser 0, seccomp neither
  RuntimeDefault nor Localhost, any /proc mount other than Default.
As upstream, a pod in its own user namespace (`hostUsers: false`) is exempt from the non-root and
baseline /proc mount rules, and a Windows pod from the restricted capability, seccomp and privilege
escalation rules.
"""

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from llmkube.plan.apiserver.memo import ContentMemo

Level = Literal["privileged", "baseline", "restricted"]
LEVELS: tuple[Level, ...] = get_args(Level)
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"

APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
_BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
_SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
        "net.ipv4.tcp_slow_start_after_idle",
        "net.ipv4.tcp_notsent_lowat",
    }
)
_SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
_RESTRICTED_VOLUME_TYPES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "image",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
_GOOD_PROFILE_TYPES = frozenset({"RuntimeDefault", "Localhost"})
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


@dataclass(frozen=True)
class Violation:
    #: the check's id in pod-security-admission, e.g. "privileged", "runAsNonRoot"
    check: str
    #: the lowest level that forbids it
    level: Level
    #: what PodSecurity names it in its refusals, e.g. "runAsNonRoot != true"
    reason: str
    #: what it found, in PodSecurity's words, e.g. `container "server" must not set ...=true`
    detail: str
    #: where, as paths inside the object checked (e.g. `spec.template.spec.containers[0]...`)
    paths: tuple[str, ...]

    def text(self) -> str:
        return f"{self.reason} ({self.detail})"


def stricter(a: Level, b: Level) -> Level:
    return a if LEVELS.index(a) >= LEVELS.index(b) else b


def parse_level(value: str | None) -> Level | None:
    """A namespace label's level as PodSecurity reads it; None for a missing or unknown value
    (PodSecurity then applies the cluster's default, which the controller cannot see)."""
    for level in LEVELS:
        if value == level:
            return level
    return None


@dataclass(frozen=True)
class _Container:
    path: str
    name: str
    body: Mapping[str, Any]

    @property
    def security(self) -> Mapping[str, Any]:
        value = self.body.get("securityContext")
        return value if isinstance(value, Mapping) else {}


class _Pod:
    def __init__(self, template: Mapping[str, Any], prefix: str) -> None:
        metadata = template.get("metadata")
        spec = template.get("spec")
        self.annotations: Mapping[str, Any] = (
            (metadata.get("annotations") or {}) if isinstance(metadata, Mapping) else {}
        )
        self.spec: Mapping[str, Any] = spec if isinstance(spec, Mapping) else {}
        self.prefix = prefix
        security = self.spec.get("securityContext")
        self.security: Mapping[str, Any] = security if isinstance(security, Mapping) else {}

    @property
    def annotations_path(self) -> str:
        return f"{self.prefix}.metadata.annotations" if self.prefix else "metadata.annotations"

    def path(self, rest: str) -> str:
        return f"{self.prefix}.spec.{rest}" if self.prefix else f"spec.{rest}"

    def containers(self) -> Iterator[_Container]:
        for field in ("initContainers", "containers", "ephemeralContainers"):
            entries = self.spec.get(field)
            if not isinstance(entries, list):
                continue
            for index, body in enumerate(entries):
                if isinstance(body, Mapping):
                    yield _Container(self.path(f"{field}[{index}]"), str(body.get("name") or ""), body)

    @property
    def user_namespace(self) -> bool:
        return self.spec.get("hostUsers") is False

    @property
    def windows(self) -> bool:
        os_spec = self.spec.get("os")
        return isinstance(os_spec, Mapping) and os_spec.get("name") == "windows"


def _quote(names: list[str]) -> str:
    return ", ".join(f'"{name}"' for name in names)


def _who(containers: list[str]) -> str:
    return f"{'container' if len(containers) == 1 else 'containers'} {_quote(containers)}"


def _setters(pod_bad: bool, containers: list[str]) -> str:
    parts = ["pod"] if pod_bad else []
    if containers:
        parts.append(_who(containers))
    return " and ".join(parts)


Check = Callable[[_Pod], Violation | None]


def _windows_host_process(pod: _Pod) -> Violation | None:
    pod_bad = (pod.security.get("windowsOptions") or {}).get("hostProcess") is True
    paths = [pod.path("securityContext.windowsOptions.hostProcess")] if pod_bad else []
    bad = []
    for container in pod.containers():
        if (container.security.get("windowsOptions") or {}).get("hostProcess") is True:
            bad.append(container.name)
            paths.append(f"{container.path}.securityContext.windowsOptions.hostProcess")
    if not paths:
        return None
    detail = f"{_setters(pod_bad, bad)} must not set securityContext.windowsOptions.hostProcess=true"
    return Violation("windowsHostProcess", "baseline", "hostProcess", detail, tuple(paths))


def _host_namespaces(pod: _Pod) -> Violation | None:
    found = [field for field in ("hostNetwork", "hostPID", "hostIPC") if pod.spec.get(field) is True]
    if not found:
        return None
    detail = ", ".join(f"{field}=true" for field in found)
    return Violation(
        "hostNamespaces", "baseline", "host namespaces", detail, tuple(pod.path(f) for f in found)
    )


def _privileged(pod: _Pod) -> Violation | None:
    bad = [c for c in pod.containers() if c.security.get("privileged") is True]
    if not bad:
        return None
    detail = f"{_who([c.name for c in bad])} must not set securityContext.privileged=true"
    paths = tuple(f"{c.path}.securityContext.privileged" for c in bad)
    return Violation("privileged", "baseline", "privileged", detail, paths)


def _added_capabilities(container: _Container) -> list[str]:
    capabilities = container.security.get("capabilities")
    added = capabilities.get("add") if isinstance(capabilities, Mapping) else None
    return [str(c) for c in added] if isinstance(added, list) else []


def _capabilities_baseline(pod: _Pod) -> Violation | None:
    bad, extra, paths = [], set(), []
    for container in pod.containers():
        beyond = [c for c in _added_capabilities(container) if c not in _BASELINE_CAPABILITIES]
        if beyond:
            bad.append(container.name)
            extra.update(beyond)
            paths.append(f"{container.path}.securityContext.capabilities.add")
    if not bad:
        return None
    detail = f"{_who(bad)} must not include {_quote(sorted(extra))} in securityContext.capabilities.add"
    return Violation("capabilities_baseline", "baseline", "non-default capabilities", detail, tuple(paths))


def _volume_type(volume: Mapping[str, Any]) -> str:
    for key in volume:
        if key != "name":
            return str(key)
    return "unknown"


def _host_path_volumes(pod: _Pod) -> Violation | None:
    volumes = pod.spec.get("volumes")
    entries = list(enumerate(volumes)) if isinstance(volumes, list) else []
    bad = [(i, v) for i, v in entries if isinstance(v, Mapping) and v.get("hostPath") is not None]
    if not bad:
        return None
    names = [str(v.get("name") or "") for _, v in bad]
    detail = f"{'volume' if len(names) == 1 else 'volumes'} {_quote(names)}"
    paths = tuple(pod.path(f"volumes[{i}].hostPath") for i, _ in bad)
    return Violation("hostPathVolumes", "baseline", "hostPath volumes", detail, paths)


def _host_ports(pod: _Pod) -> Violation | None:
    bad, ports, paths = [], set(), []
    for container in pod.containers():
        found = False
        for index, port in enumerate(container.body.get("ports") or []):
            host_port = port.get("hostPort") if isinstance(port, Mapping) else None
            if host_port:
                found = True
                ports.add(int(host_port))
                paths.append(f"{container.path}.ports[{index}].hostPort")
        if found:
            bad.append(container.name)
    if not bad:
        return None
    verb = "uses" if len(bad) == 1 else "use"
    noun = "hostPort" if len(ports) == 1 else "hostPorts"
    detail = f"{_who(bad)} {verb} {noun} {', '.join(str(p) for p in sorted(ports))}"
    return Violation("hostPorts", "baseline", "hostPort", detail, tuple(paths))


def _bad_profile(context: Mapping[str, Any], field: str) -> str | None:
    profile = context.get(field)
    if not isinstance(profile, Mapping):
        return None
    kind = str(profile.get("type") or "")
    return None if kind in _GOOD_PROFILE_TYPES else kind


def _app_armor(pod: _Pod) -> Violation | None:
    setters, values, paths = [], set(), []
    if (kind := _bad_profile(pod.security, "appArmorProfile")) is not None:
        setters.append("pod")
        values.add(kind)
        paths.append(pod.path("securityContext.appArmorProfile.type"))
    bad = []
    for container in pod.containers():
        if (kind := _bad_profile(container.security, "appArmorProfile")) is not None:
            bad.append(container.name)
            values.add(kind)
            paths.append(f"{container.path}.securityContext.appArmorProfile.type")
        elif (synced := _synced_app_armor(pod, container)) is not None:
            # The API server copies a container's deprecated annotation into its field before
            # admission, so PodSecurity sees both.
            bad.append(container.name)
            values.add(synced)
            paths.append(f"{pod.annotations_path}[{APPARMOR_ANNOTATION_PREFIX}{container.name}]")
    if bad:
        setters.append(_who(bad))
    annotations = sorted(
        f'{key}="{value}"'
        for key, value in pod.annotations.items()
        if str(key).startswith(APPARMOR_ANNOTATION_PREFIX)
        and not (not value or value == "runtime/default" or str(value).startswith("localhost/"))
    )
    shown = sorted(values)
    if annotations:
        shown += annotations
        setters.append("annotation" if len(annotations) == 1 else "annotations")
        paths += [f"{pod.annotations_path}[{entry.partition('=')[0]}]" for entry in annotations]
    if not setters:
        return None
    reason = "forbidden AppArmor profile" if len(shown) == 1 else "forbidden AppArmor profiles"
    detail = f"{' and '.join(setters)} must not set AppArmor profile type to {_quote(shown)}"
    return Violation("appArmorProfile", "baseline", reason, detail, tuple(paths))


_APPARMOR_ANNOTATION_TYPES = {"unconfined": "Unconfined", "runtime/default": "RuntimeDefault"}


def _synced_app_armor(pod: _Pod, container: _Container) -> str | None:
    """The forbidden profile type the API server writes into a container's empty appArmorProfile
    from its annotation (not on Windows pods, nor when it equals the pod's own profile)."""
    if pod.windows or "appArmorProfile" in container.security:
        return None
    annotation = pod.annotations.get(f"{APPARMOR_ANNOTATION_PREFIX}{container.name}")
    if annotation is None:
        return None
    kind = (
        "Localhost"
        if str(annotation).startswith("localhost/")
        else _APPARMOR_ANNOTATION_TYPES.get(str(annotation))
    )
    if kind is None or kind in _GOOD_PROFILE_TYPES:
        return None
    pod_profile = pod.security.get("appArmorProfile")
    if isinstance(pod_profile, Mapping) and pod_profile.get("type") == kind:
        return None
    return kind


def _se_linux(pod: _Pod) -> Violation | None:
    bad_types: set[str] = set()
    flags = {"user": False, "role": False}

    def valid(options: Any) -> bool:
        if not isinstance(options, Mapping):
            return True
        ok = True
        kind = str(options.get("type") or "")
        if kind not in _SELINUX_TYPES:
            bad_types.add(kind)
            ok = False
        for field in ("user", "role"):
            if options.get(field):
                flags[field] = True
                ok = False
        return ok

    paths = []
    pod_bad = not valid(pod.security.get("seLinuxOptions"))
    if pod_bad:
        paths.append(pod.path("securityContext.seLinuxOptions"))
    bad = []
    for container in pod.containers():
        if not valid(container.security.get("seLinuxOptions")):
            bad.append(container.name)
            paths.append(f"{container.path}.securityContext.seLinuxOptions")
    if not paths:
        return None
    data = []
    if bad_types:
        data.append(f"{'type' if len(bad_types) == 1 else 'types'} {_quote(sorted(bad_types))}")
    data += [f"{field} may not be set" for field in ("user", "role") if flags[field]]
    detail = f"{_setters(pod_bad, bad)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}"
    return Violation("seLinuxOptions", "baseline", "seLinuxOptions", detail, tuple(paths))


def _proc_mount(pod: _Pod, *, restricted: bool) -> Violation | None:
    if not restricted and pod.user_namespace:
        return None
    bad, kinds, paths = [], set(), []
    for container in pod.containers():
        mount = container.security.get("procMount")
        if mount is not None and mount != "Default":
            bad.append(container.name)
            kinds.add(str(mount))
            paths.append(f"{container.path}.securityContext.procMount")
    if not bad:
        return None
    detail = f"{_who(bad)} must not set securityContext.procMount to {_quote(sorted(kinds))}"
    check = "procMount_restricted" if restricted else "procMount"
    return Violation(check, "restricted" if restricted else "baseline", "procMount", detail, tuple(paths))


def _seccomp(pod: _Pod, *, restricted: bool) -> Violation | None:
    if restricted and pod.windows:
        return None
    setters, values, paths = [], set(), []
    pod_profile = pod.security.get("seccompProfile")
    pod_set = isinstance(pod_profile, Mapping)
    pod_bad = (kind := _bad_profile(pod.security, "seccompProfile")) is not None
    if pod_bad:
        setters.append("pod")
        values.add(kind or "")
        paths.append(pod.path("securityContext.seccompProfile.type"))
    explicit, implicit = [], []
    for container in pod.containers():
        if isinstance(container.security.get("seccompProfile"), Mapping):
            if (kind := _bad_profile(container.security, "seccompProfile")) is not None:
                explicit.append(container.name)
                values.add(kind)
                paths.append(f"{container.path}.securityContext.seccompProfile.type")
        elif restricted and not (pod_set and not pod_bad):
            implicit.append(container)
    if explicit:
        setters.append(_who(explicit))
    check = "seccompProfile_restricted" if restricted else "seccompProfile_baseline"
    level: Level = "restricted" if restricted else "baseline"
    if setters:
        shown = _quote(sorted(values))
        detail = f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to {shown}"
        return Violation(check, level, "seccompProfile", detail, tuple(paths))
    if implicit:
        detail = (
            f"pod or {_who([c.name for c in implicit])} must set securityContext.seccompProfile.type "
            'to "RuntimeDefault" or "Localhost"'
        )
        return Violation(
            check, level, "seccompProfile", detail, (pod.path("securityContext.seccompProfile"),)
        )
    return None


def _sysctls(pod: _Pod) -> Violation | None:
    sysctls = pod.security.get("sysctls")
    entries = list(enumerate(sysctls)) if isinstance(sysctls, list) else []
    bad = [
        (i, str(s.get("name")))
        for i, s in entries
        if isinstance(s, Mapping) and s.get("name") not in _SAFE_SYSCTLS
    ]
    if not bad:
        return None
    detail = ", ".join(name for _, name in bad)
    paths = tuple(pod.path(f"securityContext.sysctls[{i}].name") for i, _ in bad)
    return Violation("sysctls", "baseline", "forbidden sysctls", detail, paths)


def _handler_hosts(handler: Any) -> list[str]:
    if not isinstance(handler, Mapping):
        return []
    hosts = []
    for field in ("httpGet", "tcpSocket"):
        action = handler.get(field)
        if isinstance(action, Mapping) and action.get("host"):
            hosts.append(str(action["host"]))
    return hosts


def _probe_hosts(pod: _Pod) -> Violation | None:
    bad: list[str] = []
    hosts: set[str] = set()
    paths = []
    for container in pod.containers():
        handlers = [(probe, container.body.get(probe)) for probe in _PROBES]
        lifecycle = container.body.get("lifecycle")
        if isinstance(lifecycle, Mapping):
            handlers += [(f"lifecycle.{hook}", lifecycle.get(hook)) for hook in ("postStart", "preStop")]
        for where, handler in handlers:
            found = _handler_hosts(handler)
            if found:
                hosts.update(found)
                paths.append(f"{container.path}.{where}")
                if container.name not in bad:
                    bad.append(container.name)
    if not bad:
        return None
    verb = "uses" if len(bad) == 1 else "use"
    noun = "probe or lifecycle host" if len(hosts) == 1 else "probe or lifecycle hosts"
    detail = f"{_who(sorted(bad))} {verb} {noun} {_quote(sorted(hosts))}"
    return Violation(
        "hostProbesAndHostLifecycle", "baseline", "probe or lifecycle host", detail, tuple(paths)
    )


def _allow_privilege_escalation(pod: _Pod) -> Violation | None:
    if pod.windows:
        return None
    bad = [c for c in pod.containers() if c.security.get("allowPrivilegeEscalation") is not False]
    if not bad:
        return None
    detail = f"{_who([c.name for c in bad])} must set securityContext.allowPrivilegeEscalation=false"
    paths = tuple(f"{c.path}.securityContext.allowPrivilegeEscalation" for c in bad)
    return Violation(
        "allowPrivilegeEscalation", "restricted", "allowPrivilegeEscalation != false", detail, paths
    )


def _capabilities_restricted(pod: _Pod) -> Violation | None:
    if pod.windows:
        return None
    missing, adding, extra, paths = [], [], set(), []
    for container in pod.containers():
        capabilities = container.security.get("capabilities")
        dropped = capabilities.get("drop") if isinstance(capabilities, Mapping) else None
        if not (isinstance(dropped, list) and "ALL" in dropped):
            missing.append(container.name)
            paths.append(f"{container.path}.securityContext.capabilities.drop")
        beyond = [c for c in _added_capabilities(container) if c != "NET_BIND_SERVICE"]
        if beyond:
            adding.append(container.name)
            extra.update(beyond)
            paths.append(f"{container.path}.securityContext.capabilities.add")
    details = []
    if missing:
        details.append(f'{_who(missing)} must set securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(
            f"{_who(adding)} must not include {_quote(sorted(extra))} in securityContext.capabilities.add"
        )
    if not details:
        return None
    return Violation(
        "capabilities_restricted", "restricted", "unrestricted capabilities", "; ".join(details), tuple(paths)
    )


def _restricted_volumes(pod: _Pod) -> Violation | None:
    volumes = pod.spec.get("volumes")
    entries = list(enumerate(volumes)) if isinstance(volumes, list) else []
    bad = [
        (i, v)
        for i, v in entries
        if isinstance(v, Mapping) and _volume_type(v) not in _RESTRICTED_VOLUME_TYPES
    ]
    if not bad:
        return None
    names = [str(v.get("name") or "") for _, v in bad]
    kinds = sorted({_volume_type(v) for _, v in bad})
    one = len(names) == 1
    detail = (
        f"{'volume' if one else 'volumes'} {_quote(names)} {'uses' if one else 'use'} "
        f"{'restricted volume type' if len(kinds) == 1 else 'restricted volume types'} {_quote(kinds)}"
    )
    paths = tuple(pod.path(f"volumes[{i}]") for i, _ in bad)
    return Violation("restrictedVolumes", "restricted", "restricted volume types", detail, paths)


def _run_as_non_root(pod: _Pod) -> Violation | None:
    if pod.user_namespace:
        return None
    pod_value = pod.security.get("runAsNonRoot")
    pod_bad = pod_value is False
    explicit, implicit, paths = [], [], []
    if pod_bad:
        paths.append(pod.path("securityContext.runAsNonRoot"))
    for container in pod.containers():
        value = container.security.get("runAsNonRoot")
        if value is not None:
            if value is False:
                explicit.append(container.name)
                paths.append(f"{container.path}.securityContext.runAsNonRoot")
        elif pod_value is not True:
            implicit.append(container.name)
    if pod_bad or explicit:
        detail = f"{_setters(pod_bad, explicit)} must not set securityContext.runAsNonRoot=false"
        return Violation("runAsNonRoot", "restricted", "runAsNonRoot != true", detail, tuple(paths))
    if implicit:
        detail = f"pod or {_who(implicit)} must set securityContext.runAsNonRoot=true"
        return Violation(
            "runAsNonRoot",
            "restricted",
            "runAsNonRoot != true",
            detail,
            (pod.path("securityContext.runAsNonRoot"),),
        )
    return None


def _run_as_user(pod: _Pod) -> Violation | None:
    if pod.user_namespace:
        return None
    pod_bad = pod.security.get("runAsUser") == 0
    paths = [pod.path("securityContext.runAsUser")] if pod_bad else []
    bad = []
    for container in pod.containers():
        if container.security.get("runAsUser") == 0:
            bad.append(container.name)
            paths.append(f"{container.path}.securityContext.runAsUser")
    if not paths:
        return None
    detail = f"{_setters(pod_bad, bad)} must not set runAsUser=0"
    return Violation("runAsUser", "restricted", "runAsUser=0", detail, tuple(paths))


# In PodSecurity's order; at restricted, a restricted check replaces the baseline one it overrides.
_BASELINE: tuple[tuple[str, Check], ...] = (
    ("appArmorProfile", _app_armor),
    ("capabilities_baseline", _capabilities_baseline),
    ("hostNamespaces", _host_namespaces),
    ("hostPathVolumes", _host_path_volumes),
    ("hostPorts", _host_ports),
    ("hostProbesAndHostLifecycle", _probe_hosts),
    ("privileged", _privileged),
    ("procMount", lambda pod: _proc_mount(pod, restricted=False)),
    ("seLinuxOptions", _se_linux),
    ("seccompProfile_baseline", lambda pod: _seccomp(pod, restricted=False)),
    ("sysctls", _sysctls),
    ("windowsHostProcess", _windows_host_process),
)
_RESTRICTED: tuple[tuple[str, Check, str | None], ...] = (
    ("allowPrivilegeEscalation", _allow_privilege_escalation, None),
    ("capabilities_restricted", _capabilities_restricted, "capabilities_baseline"),
    ("procMount_restricted", lambda pod: _proc_mount(pod, restricted=True), "procMount"),
    ("restrictedVolumes", _restricted_volumes, "hostPathVolumes"),
    ("runAsNonRoot", _run_as_non_root, None),
    ("runAsUser", _run_as_user, None),
    ("seccompProfile_restricted", lambda pod: _seccomp(pod, restricted=True), "seccompProfile_baseline"),
)


def violations(
    template: Mapping[str, Any], level: Level, *, prefix: str = "spec.template"
) -> list[Violation]:
    """What the pod template (`{metadata, spec}`) does that `level` forbids; [] when it meets it.
    Paths start with `prefix` (the template's place in the object: a Deployment's by default)."""
    if level == "privileged":
        return []
    found = _JUDGED.get(template, f"{level}\0{prefix}", lambda: tuple(_violations(template, level, prefix)))
    return list(found)


#: a converged cluster's templates: an unchanged one is not judged again (memo.py)
_JUDGED: ContentMemo[tuple[Violation, ...]] = ContentMemo(8192)


def _violations(template: Mapping[str, Any], level: Level, prefix: str) -> list[Violation]:
    pod = _Pod(template, prefix)
    overridden = {replaced for _, _, replaced in _RESTRICTED if replaced} if level == "restricted" else set()
    checks: list[Check] = [check for check_id, check in _BASELINE if check_id not in overridden]
    if level == "restricted":
        checks += [check for _, check, _ in _RESTRICTED]
    return [found for check in checks if (found := check(pod)) is not None]


def meets(template: Mapping[str, Any], level: Level) -> bool:
    return not violations(template, level)


def pod_level(template: Mapping[str, Any]) -> Level:
    """The strictest level the template meets."""
    strictest_first: tuple[Level, ...] = ("restricted", "baseline")
    for level in strictest_first:
        if meets(template, level):
            return level
    return "privileged"
