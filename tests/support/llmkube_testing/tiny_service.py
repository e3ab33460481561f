"""A tiny llama.cpp service that really serves, for the node tier's tests and `llmkube run`.

Two parts, both plain objects to apply:
- `model_server(namespace, files)`: a Deployment + Service that serve the tiny test GGUF over HTTP
  (with byte ranges), so a Model's source is an ordinary http URL inside the cluster and nothing is
  downloaded from outside. The file and the server (`llmkube_testing/fileserver.py`, standard
  library only) are written on the host (`write_model_files`: the `gguf` writer is a test
  dependency, and the controller image carries no `llmkube_testing`) and reach the pod through a
  read-only hostPath volume (the node is this machine); the pod runs the server with the Python of
  the controller image;
- `tiny_llamacpp(namespace, name, source)`: a Model for that URL and an InferenceService with the
  llamacpp runtime on the locally built llama-server image. The model-downloader init container
  fetches the file into the namespace's model cache and llama-server loads it;
- `tiny_router(namespace, name, backend)`: a ModelRouter in front of such a service.
"""

from pathlib import Path
from typing import Any

from llmkube.api.constants import API_VERSION
from llmkube_testing import fileserver
from llmkube_testing.images import CONTROLLER, LLAMA_SERVER
from llmkube_testing.tiny_gguf import write_tiny_gguf

MODEL_SERVER = "tiny-model-server"
MODEL_FILE = "tiny-llama.gguf"
MODEL_SERVER_PORT = 8080
#: the file server, beside the files it serves (a name no Model asks for)
SERVER_SCRIPT = ".fileserver.py"

Obj = dict[str, Any]


def write_model_files(directory: Path) -> Path:
    """Writes the tiny test model as `directory`/MODEL_FILE (readable by the pod's non-root user) and
    returns `directory`, for `model_server`."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)
    write_tiny_gguf(directory / MODEL_FILE).chmod(0o644)
    server = directory / SERVER_SCRIPT
    server.write_text(Path(fileserver.__file__).read_text())
    server.chmod(0o644)
    return directory


def model_server(
    namespace: str, files: Path, *, cluster_ip: str | None = None, image: str = CONTROLLER.ref
) -> list[Obj]:
    """The objects that serve the files in the host directory `files` (see `write_model_files`)."""
    labels = {"app.kubernetes.io/name": MODEL_SERVER}
    command = ["python", f"/srv/{SERVER_SCRIPT}", "/srv", "--port", str(MODEL_SERVER_PORT)]
    deployment: Obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": MODEL_SERVER, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 5,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [
                        {
                            "name": "files",
                            "image": image,
                            "imagePullPolicy": "Never",
                            "command": command,
                            "ports": [{"name": "http", "containerPort": MODEL_SERVER_PORT}],
                            "readinessProbe": {
                                "httpGet": {"path": f"/{MODEL_FILE}", "port": MODEL_SERVER_PORT},
                                "periodSeconds": 1,
                            },
                            "volumeMounts": [{"name": "files", "mountPath": "/srv", "readOnly": True}],
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                        }
                    ],
                    "volumes": [{"name": "files", "hostPath": {"path": str(files), "type": "Directory"}}],
                },
            },
        },
    }
    service: Obj = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": MODEL_SERVER, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": labels,
            "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
            **({"clusterIP": cluster_ip} if cluster_ip else {}),
        },
    }
    return [deployment, service]


def model_url(cluster_ip: str, file: str = MODEL_FILE) -> str:
    return f"http://{cluster_ip}/{file}"


def tiny_llamacpp(
    namespace: str,
    name: str,
    source: str,
    *,
    image: str = LLAMA_SERVER.ref,
    context_size: int = 256,
    replicas: int = 1,
    **spec: Any,
) -> list[Obj]:
    model: Obj = {
        "apiVersion": API_VERSION,
        "kind": "Model",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"source": source, "format": "gguf", "hardware": {"accelerator": "cpu"}},
    }
    isvc: Obj = {
        "apiVersion": API_VERSION,
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "modelRef": name,
            "runtime": "llamacpp",
            "image": image,
            "replicas": replicas,
            "contextSize": context_size,
            "resources": {"cpu": "500m", "memory": "256Mi"},
            "endpoint": {"port": 8080, "path": "/v1/chat/completions", "type": "ClusterIP"},
            **spec,
        },
    }
    return [model, isvc]


def tiny_router(namespace: str, name: str, backend: str) -> Obj:
    """A ModelRouter with one InferenceService backend: requests for the model `backend` (and, by
    the default route, any other) go to its ready pods."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ModelRouter",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "backends": [{"name": backend, "tier": "local", "inferenceServiceRef": {"name": backend}}],
            "rules": [{"name": backend, "match": {"models": [backend]}, "route": {"backends": [backend]}}],
            "defaultRoute": backend,
        },
    }


def chat_request(prompt: str = "Hello, who are you?", max_tokens: int = 8) -> Obj:
    # A fixed seed and a low temperature: the same (gibberish) answer every time.
    messages = [{"role": "user", "content": prompt}]
    return {"messages": messages, "max_tokens": max_tokens, "seed": 42, "temperature": 0}
