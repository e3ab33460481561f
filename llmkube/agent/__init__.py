"""`llmkube agent`: the host agent, which serves metal InferenceServices from a machine outside the
kubelet (an Apple Silicon Mac with Metal, a Linux box with a GPU or CPU) with llama.cpp's
llama-server, and registers them in the cluster as EndpointSlices of the controller's Services.

Its decisions are pure (llmkube.plan.agent); this package does the I/O: `flags` and `config` (the
command line, checked at start), `command` (the process, on the manager's machinery), `agent`
(informers, the reconcile, eviction, the state file), `runner` and `processes` (server processes,
supervised), `health` (asking a server how it is), `fetch` (model files), `state` (what a
restarted agent adopts), `host` (memory, processes, addresses of the host), `metrics`,
`permissions` (its RBAC, one list).

It needs only the package's own dependencies (`pip install llmkube`: aiohttp, pydantic, orjson,
structlog, prometheus-client, PyYAML for a kubeconfig file), imports nothing of the controller's
process (llmkube.process, the controllers) but the model-source helpers it shares with the
controller (egress rules, confined opens, the GGUF header reader), and nothing of llmkube_testing.
"""
