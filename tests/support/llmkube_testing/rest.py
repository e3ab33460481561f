"""A small synchronous Kubernetes REST client for set-up work: starting a local cluster, installing
manifests, test fixtures. The controller itself uses the async client in `llmkube.kube`; this one
exists so cluster set-up has no dependency on the code under test.
"""

import base64
import functools
import json
import ssl
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]


class RestError(Exception):
    def __init__(self, status: int, method: str, path: str, body: Obj | str) -> None:
        self.status = status
        self.body = body
        message = body.get("message", body) if isinstance(body, dict) else body
        super().__init__(f"{method} {path}: HTTP {status}: {message}")

    @property
    def reason(self) -> str:
        return str(self.body.get("reason", "")) if isinstance(self.body, dict) else ""


@dataclass(frozen=True)
class _ApiResource:
    plural: str
    namespaced: bool


@dataclass
class KubeRest:
    server: str
    ssl_context: ssl.SSLContext
    token: str | None = None
    timeout: float = 30.0
    _resources: dict[tuple[str, str], _ApiResource] = field(default_factory=dict, repr=False)

    @classmethod
    def from_kubeconfig(cls, path: Path | str, context: str | None = None) -> "KubeRest":
        config = yaml.safe_load(Path(path).read_text())
        ctx_name = context or config.get("current-context")
        ctx = next(c["context"] for c in config["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == ctx["cluster"])
        user: dict[str, Any] = next(
            (u["user"] for u in config.get("users", []) if u["name"] == ctx.get("user")), {}
        )
        context_ = ssl.create_default_context()
        if cluster.get("insecure-skip-tls-verify"):
            context_.check_hostname = False
            context_.verify_mode = ssl.CERT_NONE
        elif "certificate-authority-data" in cluster:
            context_.load_verify_locations(
                cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
            )
        elif "certificate-authority" in cluster:
            context_.load_verify_locations(cafile=cluster["certificate-authority"])
        if "client-certificate-data" in user:
            with tempfile.TemporaryDirectory() as tmp:
                cert, key = Path(tmp, "c.crt"), Path(tmp, "c.key")
                cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
                key.write_bytes(base64.b64decode(user["client-key-data"]))
                context_.load_cert_chain(cert, key)
        elif "client-certificate" in user:
            context_.load_cert_chain(user["client-certificate"], user["client-key"])
        return cls(server=cluster["server"].rstrip("/"), ssl_context=context_, token=user.get("token"))

    # -- raw requests -------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        body: Obj | bytes | None = None,
        *,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
        accept: str = "application/json",
    ) -> Obj:
        url = self.server + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", accept)
        if data is not None:
            req.add_header("Content-Type", content_type)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, context=self.ssl_context, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as err:
            raw_err = err.read()
            try:
                parsed: Obj | str = json.loads(raw_err)
            except ValueError:
                parsed = raw_err.decode(errors="replace")
            raise RestError(err.code, method, path, parsed) from None
        if not raw:
            return {}
        result: Obj = json.loads(raw)
        return result

    def get_text(self, path: str) -> tuple[int, str]:
        try:
            req = urllib.request.Request(self.server + path)
            if self.token:
                req.add_header("Authorization", f"Bearer {self.token}")
            with urllib.request.urlopen(req, context=self.ssl_context, timeout=self.timeout) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode(errors="replace")

    # -- discovery ----------------------------------------------------------------------------
    def _resource(self, api_version: str, kind: str) -> _ApiResource:
        key = (api_version, kind)
        if key not in self._resources:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            for item in self.request("GET", base)["resources"]:
                if "/" not in item["name"]:
                    self._resources[(api_version, item["kind"])] = _ApiResource(
                        item["name"], item["namespaced"]
                    )
        if key not in self._resources:
            raise LookupError(f"the server has no resource of kind {kind} in {api_version}")
        return self._resources[key]

    def path_for(self, api_version: str, kind: str, namespace: str | None = None, name: str = "") -> str:
        res = self._resource(api_version, kind)
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        ns = f"/namespaces/{namespace}" if res.namespaced and namespace else ""
        return f"{base}{ns}/{res.plural}" + (f"/{name}" if name else "")

    def forget_discovery(self) -> None:
        """Call after installing CRDs so their kinds are discovered."""
        self._resources.clear()

    # -- object verbs -------------------------------------------------------------------------
    def apply(self, obj: Obj, *, field_manager: str = "llmkube-setup", namespace: str | None = None) -> Obj:
        meta = obj["metadata"]
        ns = meta.get("namespace") or namespace
        path = self.path_for(obj["apiVersion"], obj["kind"], ns, meta["name"])
        return self.request(
            "PATCH",
            path,
            obj,
            content_type="application/apply-patch+yaml",
            query={"fieldManager": field_manager, "force": "true"},
        )

    def apply_all(self, docs: Iterable[Obj], *, namespace: str | None = None) -> list[Obj]:
        return [self.apply(doc, namespace=namespace) for doc in docs if doc]

    def create(self, obj: Obj, *, namespace: str | None = None) -> Obj:
        ns = obj["metadata"].get("namespace") or namespace
        return self.request("POST", self.path_for(obj["apiVersion"], obj["kind"], ns), obj)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj:
        return self.request("GET", self.path_for(api_version, kind, namespace, name))

    def get_or_none(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        try:
            return self.get(api_version, kind, name, namespace)
        except RestError as err:
            if err.status == 404:
                return None
            raise

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> list[Obj]:
        query = {"labelSelector": label_selector} if label_selector else None
        items: list[Obj] = self.request("GET", self.path_for(api_version, kind, namespace), query=query)[
            "items"
        ]
        return items

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation: str = "Background",
    ) -> None:
        try:
            self.request(
                "DELETE",
                self.path_for(api_version, kind, namespace, name),
                {"propagationPolicy": propagation},
            )
        except RestError as err:
            if err.status != 404:
                raise


def load_yaml_documents(path: Path) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def wait_until(
    predicate: Callable[[], Any], *, timeout: float, interval: float = 0.2, what: str = "condition"
) -> Any:
    """Poll `predicate` until it returns something truthy; raise TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = predicate()
        except (RestError, OSError) as err:  # the server may still be coming up, RBAC may lag
            last_error = err
        else:
            if result:
                return result
        time.sleep(interval)
    raise TimeoutError(
        f"timed out after {timeout:.0f}s waiting for {what}" + (f": {last_error}" if last_error else "")
    )


def condition_true(obj: Obj, type_: str) -> bool:
    """Whether `status.conditions` has `type_` True (null-safe: new objects may report `null`)."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == type_ and c.get("status") == "True" for c in conditions)


def wait_for_crds(admin: KubeRest, names: Iterable[str], timeout: float = 30) -> None:
    """Wait until each CRD is Established, then forget discovery so its kind can be used."""

    def established(name: str) -> bool:
        return condition_true(
            admin.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name), "Established"
        )

    for name in names:
        wait_until(functools.partial(established, name), timeout=timeout, what=f"CRD {name} Established")
    admin.forget_discovery()
