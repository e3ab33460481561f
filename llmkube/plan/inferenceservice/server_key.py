"""The key a metal service's host servers ask of every caller, so the router stays the front door.

A host agent's llama-server listens on the host's LAN address, outside the cluster's network
policies: without a key, anyone on that network could call it past the router's keys and budgets.
So each metal InferenceService has a key of its own:

* the controller keeps one random master key, the Secret `llmkube-metal-server-key` in its own
  namespace (it creates it the first time a metal service needs it; only the controller and the
  host agents may read it, by name);
* a service's key is HMAC-SHA256(master, "<namespace>/<name>/<uid>"): every agent serving the
  service derives the same key, and a service deleted and made again under its name gets a new one;
* the controller writes that key into the Secret `<service>-server-key` of the service's namespace
  (created, never read back: the controller may create Secrets but read none but the master), and
  records on the service's Service which key it wrote (`inference.llmkube.dev/server-key`: the
  Secret's name and the key's fingerprint), so a converged cluster costs no write;
* the agent starts llama-server with `--api-key-file` (a file of its own, mode 0600: the key is
  never on a command line), and a ModelRouter mounts each InferenceService backend's Secret and
  sends the key to its endpoints.
"""

import hashlib
import hmac
from typing import Any

from llmkube.api.constants import SERVER_KEY_SECRET_KEY, SERVER_KEY_SECRET_SUFFIX
from llmkube.api.inferenceservice import InferenceService
from llmkube.plan.inferenceservice.names import managed, selector_labels
from llmkube.plan.inferenceservice.objects import object_metadata, owner_reference

#: the master key's Secret, in the controller's namespace, and its key
MASTER_SECRET = "llmkube-metal-server-key"
MASTER_KEY = "key"
#: on the service's Service: "<Secret name>/<fingerprint>" of the key the controller wrote
ANNOTATION = "inference.llmkube.dev/server-key"
#: the per-service Secret's data key
SECRET_KEY = SERVER_KEY_SECRET_KEY
LABEL = "inference.llmkube.dev/server-key"
#: the shortest master key the controller or an agent accepts (bytes)
MIN_MASTER_BYTES = 32


def secret_name(isvc_name: str) -> str:
    return f"{isvc_name}{SERVER_KEY_SECRET_SUFFIX}"


def derive(master: bytes, namespace: str, name: str, uid: str) -> str:
    """The service's key: hex, as llama-server compares it (a line of its --api-key-file)."""
    return hmac.new(master, f"{namespace}/{name}/{uid}".encode(), hashlib.sha256).hexdigest()


def fingerprint(key: str) -> str:
    """Names a key without giving it away (in an annotation, a log line, a command's identity)."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def service_key(isvc: InferenceService, master: bytes) -> str:
    meta = isvc.metadata
    return derive(master, meta.namespace or "", meta.name or "", meta.uid or "")


def annotation_value(isvc: InferenceService, master: bytes) -> str:
    return f"{secret_name(isvc.metadata.name or '')}/{fingerprint(service_key(isvc, master))}"


def secret_intent(isvc: InferenceService, master: bytes) -> dict[str, Any]:
    """The per-service Secret, owned by the service (the garbage collector deletes it with it)."""
    name = isvc.metadata.name or ""
    labels = {**managed(selector_labels(name)), LABEL: "true"}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": object_metadata(
            secret_name(name), isvc.metadata.namespace or "", labels, owner_reference(isvc)
        ),
        "stringData": {SECRET_KEY: service_key(isvc, master)},
    }


def master_problem(master: bytes | None) -> str | None:
    if master is None:
        return f"the Secret {MASTER_SECRET} has no key {MASTER_KEY}"
    if len(master) < MIN_MASTER_BYTES:
        return f"the key of the Secret {MASTER_SECRET} is shorter than {MIN_MASTER_BYTES} bytes"
    return None
