"""The most GPUs a single node offers, per resource, kept in step with the Node cache.

A service asking for more GPUs per pod than that can never run
(`llmkube.plan.inferenceservice.scheduling`). The answer changes only when a node's GPU count
does: nodes rewrite their status every few seconds (heartbeats, images, conditions), and those
changes cost one comparison of the node's GPUs. The counts are kept per node, so a change updates
them in place and the largest is searched again only for the resource whose count moved, and only
when someone asks (the first LIST's replay of thousands of nodes searches nothing).
"""

from collections.abc import Mapping
from types import MappingProxyType

from llmkube.kube.cache import Change
from llmkube.plan.inferenceservice.scheduling import NodeGpus, node_gpus


class LargestGpuNodes:
    def __init__(self) -> None:
        self._counts: dict[str, dict[str, int]] = {}  # resource -> node -> GPUs it offers
        self._largest: dict[str, NodeGpus] = {}
        self._stale: set[str] = set()

    def follow(self, change: Change) -> bool:
        """Apply one Node cache change; True when the largest node of some GPU resource changed
        (never for the first LIST's replay: every service is reconciled after a start anyway)."""
        old = node_gpus(change.old_obj) if change.old_obj is not None else {}
        new = node_gpus(change.new) if change.new is not None else {}
        if old == new:
            return False
        resources = old.keys() | new.keys()
        before = None if change.initial else {r: self._largest_of(r) for r in resources}
        name = str((change.obj.get("metadata") or {}).get("name") or "")
        for resource in resources:
            counts = self._counts.setdefault(resource, {})
            if resource in new:
                counts[name] = new[resource]
            else:
                counts.pop(name, None)
                if not counts:
                    del self._counts[resource]
            self._stale.add(resource)
        if before is None:
            return False
        return before != {r: self._largest_of(r) for r in resources}

    def largest(self) -> Mapping[str, NodeGpus]:
        """Per GPU resource, the node offering the most (the first by name among equals)."""
        for resource in list(self._stale):
            self._largest_of(resource)
        return MappingProxyType(self._largest)

    def _largest_of(self, resource: str) -> NodeGpus | None:
        if resource in self._stale:
            self._stale.discard(resource)
            counts = self._counts.get(resource)
            if counts:
                # Ties go to the first name, as plan.scheduling.largest_gpu_nodes does.
                node = min(counts, key=lambda n: (-counts[n], n))
                self._largest[resource] = NodeGpus(counts[node], node)
            else:
                self._largest.pop(resource, None)
        return self._largest.get(resource)
