"""The demo mirror controller as a real process (used by the SIGTERM test):

python run_mirror.py <kubeconfig> <namespace>
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from kube_it_mirror import setup_mirror

from llmkube.kube.leader import LeaderElectionTiming
from llmkube.manager import Manager, ManagerConfig


def main() -> None:
    kubeconfig, namespace = sys.argv[1], sys.argv[2]
    config = ManagerConfig(
        kubeconfig=kubeconfig,
        namespace=namespace,
        leader_election=True,
        lease_namespace=namespace,
        leader_timing=LeaderElectionTiming(lease_duration=15, renew_deadline=10, retry_period=2),
        metrics_bind_address="127.0.0.1:0",
        health_bind_address="127.0.0.1:0",
    )
    asyncio.run(Manager(config).run(setup_mirror))


if __name__ == "__main__":
    main()
