"""The master key of the metal services' server keys (plan/inferenceservice/server_key.py): read
once from the Secret in the controller's namespace, created there the first time a metal service
needs it and none exists. Only the leader reconciles, so only it creates; a second controller that
meets the first one's Secret (AlreadyExists) reads it."""

from __future__ import annotations

import base64
import binascii
import secrets

import structlog

from llmkube.kube.errors import AlreadyExists, NotFound
from llmkube.kube.resource import SECRETS
from llmkube.kube.rest import ApiClient
from llmkube.plan.inferenceservice.server_key import MASTER_KEY, MASTER_SECRET, master_problem

log = structlog.get_logger("llmkube.controllers.server_key")


class MasterKeyUnusable(Exception):
    """The Secret exists, but holds no usable key: an admin must mend it (the message says how)."""


class ServerKeyMaster:
    def __init__(self, client: ApiClient, namespace: str, *, field_manager: str) -> None:
        self.client = client
        self.namespace = namespace
        self.field_manager = field_manager
        self._master: bytes | None = None

    async def get(self) -> bytes:
        """The master key; API errors are raised (the reconcile that needs it retries)."""
        if self._master is not None:
            return self._master
        try:
            found = await self.client.get(SECRETS, MASTER_SECRET, self.namespace)
        except NotFound:
            found = await self._create()
        self._master = _key_of(found, self.namespace)
        return self._master

    async def _create(self) -> dict[str, object]:
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": MASTER_SECRET,
                "namespace": self.namespace,
                "labels": {"app.kubernetes.io/name": "llmkube", "app.kubernetes.io/component": "server-key"},
            },
            "stringData": {MASTER_KEY: secrets.token_hex(32)},
        }
        try:
            created = await self.client.create(
                SECRETS, secret, self.namespace, field_manager=self.field_manager
            )
            log.info("metal server master key created", namespace=self.namespace, secret=MASTER_SECRET)
            return created
        except AlreadyExists:
            return await self.client.get(SECRETS, MASTER_SECRET, self.namespace)


def _key_of(secret: dict[str, object], namespace: str) -> bytes:
    data = secret.get("data")
    encoded = data.get(MASTER_KEY) if isinstance(data, dict) else None
    master: bytes | None = None
    if isinstance(encoded, str):
        try:
            master = base64.b64decode(encoded, validate=True).strip()
        except (binascii.Error, ValueError):
            master = None
    if (problem := master_problem(master)) is not None:
        raise MasterKeyUnusable(
            f"{problem} (namespace {namespace}): delete it, and the controller makes a new one "
            f"(then delete every Secret labelled inference.llmkube.dev/server-key, docs/agent.md)"
        )
    assert master is not None
    return master
