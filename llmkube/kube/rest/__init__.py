"""Talking to an API server: `client.ApiClient` (requests, retries, typed errors, watch streams,
an optional observer of every request for tests), `transport` (aiohttp), `config` (kubeconfig or
in-cluster), `kubeconfig`, `exec_credential`, `portforward`. Imports nothing of the cache, queues,
apply, events, leader election or controllers."""
