"""The CRDs deleted and applied again (an uninstall and reinstall, a botched upgrade): the
controller's watches of InferenceServices and Models get 404s while the CRDs are gone, and it
serves a service created after their return within a few seconds, however long they were gone.

client-go backs a 404 off like any failure, up to 30 s: a CRD back after 15 s was served only
after the next long step (up to ~25 s). Prints the figure (run with -s)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from fault_support import API, create_services, eventually, in_process, installed_cluster, poll
from llmkube_testing.cluster import LocalCluster
from llmkube_testing.rest import wait_for_crds

from llmkube.api.crds import all_crds
from llmkube.controllers.resources import INFERENCE_SERVICES, MODELS
from llmkube.kube.errors import NotFound

#: from the CRDs Established to the new service's status written (the API server answers in ms)
BOUND = 5.0
GONE_FOR = 15.0


@pytest.fixture(scope="module")
def crd_cluster() -> Iterator[LocalCluster]:
    # A control plane of its own: the CRDs every other test needs are deleted here.
    yield from installed_cluster("api")


def crds_gone(cluster: LocalCluster) -> bool:
    admin = cluster.admin()
    return all(
        admin.get_or_none("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd["metadata"]["name"])
        is None
        for crd in all_crds()
    )


async def test_a_service_created_after_the_crds_return_is_served_within_seconds(
    crd_cluster: LocalCluster,
) -> None:
    admin = crd_cluster.admin()
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "crds"}})
    assert crd_cluster.controller_kubeconfig is not None
    async with in_process(crd_cluster.controller_kubeconfig) as controller:
        create_services(admin, "crds", ["before"])
        await eventually(
            lambda: (
                (admin.get(API, "InferenceService", "before", "crds").get("status") or {}).get("phase")
                == "Creating"
            ),
            what="the first service served",
        )

        for crd in all_crds():
            name = crd["metadata"]["name"]
            await asyncio.get_running_loop().run_in_executor(
                None,
                lambda name=name: admin.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", name),
            )
        await eventually(lambda: crds_gone(crd_cluster), what="the CRDs deleted")
        reflectors = [
            informer.reflector
            for informer in controller.manager.informers
            if informer.resource in (INFERENCE_SERVICES, MODELS)
        ]
        await poll(
            lambda: all(isinstance(r.last_error, NotFound) for r in reflectors),
            within=30,
            what="404s on every watch of the deleted kinds",
        )
        await asyncio.sleep(GONE_FOR)  # long enough for client-go's backoff to reach its long steps

        loop = asyncio.get_running_loop()

        def reinstall() -> None:  # off the loop: the controller runs on it
            admin.apply_all(all_crds())
            wait_for_crds(admin, [crd["metadata"]["name"] for crd in all_crds()])

        await loop.run_in_executor(None, reinstall)
        back = time.monotonic()
        await loop.run_in_executor(None, lambda: create_services(admin, "crds", ["after"]))

        def served() -> bool:
            # Its Deployment, and the status of a service whose Model is known (both caches back).
            phase = (admin.get(API, "InferenceService", "after", "crds").get("status") or {}).get("phase")
            return (
                phase == "Creating"
                and admin.get_or_none("apps/v1", "Deployment", "after", "crds") is not None
            )

        await eventually(served, within=60, what="the new service served")
        took = time.monotonic() - back
        print(f"\nCRDs gone for {GONE_FOR:.0f} s; a service created on their return served in {took:.1f} s")
        assert took < BOUND, f"served {took:.1f} s after the CRDs returned"
        assert all(r.stats.watching for r in reflectors)
