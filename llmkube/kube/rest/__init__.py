"""Talking to an API server: `client.ApiClient` (requests, retries, typed errors, watch streams),
`transport` (aiohttp), `config` (kubeconfig or in-cluster), `kubeconfig`, `exec_credential`,
`request_info` (what a request asks for, as RBAC reads it), `portforward`. Imports nothing of the
cache, queues, apply, events, leader election or controllers."""
