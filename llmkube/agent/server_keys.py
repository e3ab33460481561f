"""The server keys of the services this agent serves (plan/inferenceservice/server_key.py).

The master key is read by name from the controller's namespace (the agent's RBAC grants that one
Secret and no other), again every REFRESH seconds (an admin who rotates it gets new keys without
restarting agents); each service's key is derived from it and written to a file of the agent's
state directory, mode 0600, which llama-server reads at start (`--api-key-file`)."""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import time
from pathlib import Path

import structlog

from llmkube.api.inferenceservice import InferenceService
from llmkube.kube.errors import ApiError, Forbidden, NotFound
from llmkube.kube.resource import SECRETS
from llmkube.kube.rest import ApiClient, TransportError
from llmkube.plan.agent.launch import KEY_RETRY as RETRY
from llmkube.plan.agent.launch import KeyFile, KeyMissing
from llmkube.plan.inferenceservice.server_key import (
    MASTER_KEY,
    MASTER_SECRET,
    fingerprint,
    master_problem,
    service_key,
)

log = structlog.get_logger("llmkube.agent.keys")

REFRESH = 300.0
_MAX_KEY_FILE = 4096


class ServerKeys:
    def __init__(self, client: ApiClient, namespace: str, directory: Path) -> None:
        self.client = client
        self.namespace = namespace
        self.directory = directory
        self._master: bytes | None = None
        self._problem = f"the server key is not read yet (Secret {namespace}/{MASTER_SECRET})"
        self._next_read = 0.0

    async def _refresh(self) -> None:
        now = time.monotonic()
        if now < self._next_read:
            return
        try:
            secret = await self.client.get(SECRETS, MASTER_SECRET, self.namespace)
        except NotFound:
            self._fail(
                f"waiting for the server key: the Secret {self.namespace}/{MASTER_SECRET} does not exist "
                "yet (the controller makes it for its first metal service: is the controller running, "
                "and is --controller-namespace its namespace?)"
            )
            return
        except Forbidden:
            self._fail(
                f"this agent may not read the Secret {self.namespace}/{MASTER_SECRET}: apply "
                "manifests/agent/rbac.yaml (its Role in the controller's namespace grants that one Secret)"
            )
            return
        except (ApiError, TransportError) as error:
            self._fail(f"the server key cannot be read: {error}", keep=True)
            return
        encoded = (secret.get("data") or {}).get(MASTER_KEY)
        master: bytes | None = None
        if isinstance(encoded, str):
            with contextlib.suppress(binascii.Error, ValueError):
                master = base64.b64decode(encoded, validate=True).strip()
        if (problem := master_problem(master)) is not None:
            self._fail(f"the server key cannot be used: {problem}")
            return
        if master != self._master and self._master is not None:
            log.info("the server master key changed: servers restart with their new keys")
        self._master, self._next_read = master, now + REFRESH

    def _fail(self, message: str, *, keep: bool = False) -> None:
        """`keep`: a passing failure keeps the key known (the servers keep it too)."""
        if not keep:
            self._master = None
        if message != self._problem:
            log.warning("server key unavailable", reason=message)
        self._problem, self._next_read = message, time.monotonic() + RETRY

    async def key_file(self, isvc: InferenceService) -> KeyFile | KeyMissing:
        await self._refresh()
        if self._master is None:
            return KeyMissing(self._problem)
        key = service_key(isvc, self._master)
        meta = isvc.metadata
        path = self.directory / f"{meta.namespace}.{meta.name}.key"
        if read_key(str(path)) != key:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            temporary = path.with_suffix(".tmp")
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w") as out:
                out.write(key + "\n")
            os.replace(temporary, path)
        return KeyFile(str(path), fingerprint(key))


def read_key(path: str | None) -> str | None:
    """The key in a server's key file (the first line that is not a comment), or None."""
    if not path:
        return None
    try:
        with open(path, encoding="ascii") as file:
            text = file.read(_MAX_KEY_FILE)
    except (OSError, UnicodeDecodeError):
        return None
    return next(
        (line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")), None
    )
