"""Compaction through etcd's v3 JSON gateway (to make old resourceVersions really expire).

The gateway's endpoint is ``/v3/kv/compaction`` (``/v3/kv/compact`` answers 404)."""

from __future__ import annotations

import base64

import aiohttp


async def current_revision(etcd_endpoint: str) -> int:
    async with aiohttp.ClientSession() as http:
        body = {"key": base64.b64encode(b"/registry/llmkube-probe").decode()}
        async with http.post(f"{etcd_endpoint}/v3/kv/range", json=body) as response:
            response.raise_for_status()
            payload = await response.json(content_type=None)
    return int(payload["header"]["revision"])


async def compact(etcd_endpoint: str) -> int:
    """Compact etcd history up to now (physically); returns the compacted revision."""
    revision = await current_revision(etcd_endpoint)
    async with aiohttp.ClientSession() as http:
        body = {"revision": str(revision), "physical": True}
        async with http.post(f"{etcd_endpoint}/v3/kv/compaction", json=body) as response:
            response.raise_for_status()
    return revision
