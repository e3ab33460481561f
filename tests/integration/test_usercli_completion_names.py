"""What the completion scripts offer after `-n`, from a real API server: `llmkube completion
namespaces` lists the cluster's namespaces to a user who may list them, and to one who may not, the
namespace of the command line (no error, nothing on stderr a shell would show)."""

import subprocess
import sys
from pathlib import Path

from llmkube_testing.pytest_plugin import ClusterHandle


def completion(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmkube.cli", "completion", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin"},
        check=False,
    )


def test_the_namespaces_a_user_may_list(api_cluster: ClusterHandle, namespace: str) -> None:
    admin = completion(api_cluster.kubeconfig, "namespaces")
    assert admin.returncode == 0, admin.stderr
    offered = admin.stdout.split()
    assert {namespace, "default", "kube-system"} <= set(offered) and offered == sorted(offered)

    assert api_cluster.restricted_kubeconfig is not None
    refused = completion(api_cluster.restricted_kubeconfig, "namespaces", "-n", namespace)
    assert (refused.returncode, refused.stdout.split(), refused.stderr) == (0, [namespace], "")


def test_the_contexts_of_the_kubeconfig(api_cluster: ClusterHandle) -> None:
    contexts = completion(api_cluster.kubeconfig, "contexts")
    assert contexts.returncode == 0 and contexts.stdout.split(), contexts
