"""Is an InferenceService serving what its current spec asks? Its phase counts ready replicas (the
reference's rule: old pods of a rolling update count too); its `Ready` condition also needs the
Deployment to have rolled the current template out to every replica (plan/inferenceservice/status.py).

The Deployment to judge is the one this reconcile leaves behind: the cached one when nothing was
applied, else the object the apply returned (a changed template bumps its generation, which the
Deployment controller has not observed yet, so the service is rolling out).
"""

from dataclasses import dataclass

from llmkube.api.base import KubeObject

ROLLING_OUT = "RollingOut"


@dataclass(frozen=True)
class Rollout:
    """A Deployment's own account of its rollout (apps/v1 DeploymentStatus)."""

    #: the Deployment controller has seen the latest template (status.observedGeneration)
    observed: bool
    #: pods with the latest template (status.updatedReplicas)
    updated: int
    #: every pod of the Deployment, older templates included (status.replicas)
    total: int

    def complete(self, desired: int) -> bool:
        return self.observed and self.updated >= desired and self.total <= self.updated

    def describe(self, desired: int) -> str:
        if not self.observed:
            return "Rolling out the current spec: the Deployment controller has not observed it yet"
        older = self.total - self.updated
        old_pods = f", {older} older still running" if older > 0 else ""
        return f"Rolling out the current spec: {self.updated}/{desired} replicas updated{old_pods}"


def _count(status: KubeObject, key: str) -> int:
    value = status.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def rollout_of(deployment: KubeObject | None) -> Rollout | None:
    if deployment is None:
        return None
    generation = (deployment.get("metadata") or {}).get("generation")
    status = deployment.get("status") or {}
    observed_generation = status.get("observedGeneration")
    # Without a generation (never on a real object) there is nothing to compare: trust the counts.
    observed = not isinstance(generation, int) or (
        isinstance(observed_generation, int) and observed_generation >= generation
    )
    return Rollout(
        observed=observed, updated=_count(status, "updatedReplicas"), total=_count(status, "replicas")
    )
