"""The controller as users run it: the image from the Dockerfile, deployed by `kubectl apply -k` of
`manifests/` (only the image swapped), with its ServiceAccount token, probes, Pod Security and
leader election all real."""

from typing import Any

import pytest
from llmkube_testing.node import NodeCluster
from llmkube_testing.rest import RestError, condition_true
from node_support import (
    CONTROLLER_NAMESPACE,
    TIMINGS,
    Stopwatch,
    controller_metrics,
    controller_pods,
    deployment_available,
    metric_samples,
    wait_for,
)

from llmkube import __version__
from llmkube.manager.config import DEFAULT_LEASE_NAME


def requests_by_code(node: NodeCluster) -> dict[str, float]:
    counts: dict[str, float] = {}
    for pod in controller_pods(node.admin()):
        for labels, value in metric_samples(controller_metrics(node, pod), "rest_client_requests_total"):
            counts[labels["code"]] = counts.get(labels["code"], 0) + value
    return counts


def test_available_in_cluster_with_its_own_token(node_cluster: NodeCluster, controller: str) -> None:
    pods = controller_pods(node_cluster.admin())
    assert len(pods) == 2
    for pod in pods:
        assert condition_true(pod, "Ready"), pod["status"]  # kubelet's readiness probe on /readyz passed
        (status,) = pod["status"]["containerStatuses"]
        assert pod["spec"]["containers"][0]["image"] == "localhost/llmkube:dev"
        # The runtime names the image by any of its tags: the archive tags it :<version> too, as
        # `make image` does (hack/build-images.sh).
        assert status["image"] in {"localhost/llmkube:dev", f"localhost/llmkube:{__version__}"}, status
        assert status["restartCount"] == 0
        assert pod["spec"]["serviceAccountName"] == "llmkube-controller"
        token = [v for v in pod["spec"]["volumes"] if v["name"].startswith("kube-api-access-")]
        assert token, "the ServiceAccount token is projected into the pod"
        # Its requests go to the `kubernetes` Service: in-cluster config, not a kubeconfig.
        hosts = {
            labels["host"]
            for labels, _ in metric_samples(
                controller_metrics(node_cluster, pod), "rest_client_requests_total"
            )
        }
        assert hosts == {"10.0.0.1:443"}, hosts


def test_no_request_is_forbidden(node_cluster: NodeCluster, controller: str) -> None:
    codes = requests_by_code(node_cluster)
    assert codes.get("200", 0) > 0
    assert codes.get("403", 0) == 0, codes


def test_the_namespace_enforces_restricted_pod_security(node_cluster: NodeCluster, controller: str) -> None:
    admin = node_cluster.admin()
    labels = admin.get("v1", "Namespace", CONTROLLER_NAMESPACE)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    privileged: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "not-restricted", "namespace": CONTROLLER_NAMESPACE},
        "spec": {
            "containers": [
                {"name": "c", "image": "localhost/llmkube:dev", "securityContext": {"privileged": True}}
            ]
        },
    }
    with pytest.raises(RestError) as refused:
        admin.create(privileged)
    assert refused.value.status == 403
    assert 'violates PodSecurity "restricted:latest"' in str(refused.value)
    # ... while the controller's own pods, admitted under the same policy, run.
    assert all(p["status"]["phase"] == "Running" for p in controller_pods(admin))


def lease_holder(node: NodeCluster) -> str:
    """The pod named by the Lease (identities are `<pod name>_<uuid>`)."""
    lease = node.admin().get("coordination.k8s.io/v1", "Lease", DEFAULT_LEASE_NAME, CONTROLLER_NAMESPACE)
    return str(lease["spec"].get("holderIdentity") or "").split("_", 1)[0]


def leads(node: NodeCluster, pod: dict[str, Any]) -> float:
    """That pod's own leader_election_master_status (1 leader, 0 standby)."""
    samples = metric_samples(controller_metrics(node, pod), "leader_election_master_status")
    return sum(value for _, value in samples)


def leader_of(node: NodeCluster) -> tuple[str, dict[str, float]]:
    """The Lease's holder and each running pod's leader_election_master_status."""
    return lease_holder(node), {p["metadata"]["name"]: leads(node, p) for p in controller_pods(node.admin())}


def test_one_leader_and_a_fast_hand_over(node_cluster: NodeCluster, controller: str) -> None:
    admin = node_cluster.admin()

    def one_leader() -> tuple[str, dict[str, float]] | None:
        found = leader_of(node_cluster)
        return found if sorted(found[1].values()) == [0, 1] else None

    holder, status = wait_for(one_leader, within=60, what="exactly one leader among the two replicas")
    assert status[holder] == 1, (holder, status)

    watch = Stopwatch()
    admin.delete("v1", "Pod", holder, CONTROLLER_NAMESPACE)  # graceful: the leader releases its lease

    def another_pod_leads() -> bool:
        # The released lease goes to whichever live replica asks first: usually the standby, but the
        # Deployment's replacement pod, asking as it starts, can win the race (as with client-go).
        new_holder = lease_holder(node_cluster)
        pods = [p for p in controller_pods(admin) if p["metadata"]["name"] == new_holder != holder]
        return bool(pods) and leads(node_cluster, pods[0]) == 1

    wait_for(another_pod_leads, within=60, what="another replica to take over the lease", interval=0.2)
    TIMINGS["leader pod deleted -> another replica holds the lease (s)"] = watch.seconds()
    wait_for(
        lambda: (
            deployment_available(admin, "llmkube-controller", CONTROLLER_NAMESPACE)
            and len(controller_pods(admin)) == 2
        ),
        within=120,
        what="the Deployment to replace the deleted pod",
    )
    new_holder, status = wait_for(one_leader, within=60, what="exactly one leader again")
    assert holder not in status and status[new_holder] == 1, (holder, new_holder, status)
