"""`llmkube controller`: the controller against the configured cluster, until it is told to stop."""

import argparse
import sys

from llmkube.process.config import controllers_config, manager_config


def run_controller(args: argparse.Namespace) -> int:
    import asyncio

    from llmkube.controllers.setup import setup_controllers
    from llmkube.kube.leader.election import LeadershipLost
    from llmkube.kube.rest.config import ConfigError
    from llmkube.manager import CacheSyncTimeout, Manager

    try:
        process_config = manager_config(args)
        config = controllers_config(args)
    except ValueError as invalid:  # leader election timings client-go would refuse, a relative root
        print(f"llmkube controller: {invalid}", file=sys.stderr)
        return 2

    def setup(manager: Manager) -> None:
        setup_controllers(manager, config)

    try:
        asyncio.run(Manager(process_config).run(setup))
    except OSError as failed:  # e.g. a metrics or health port already in use: one line, no traceback
        print(f"llmkube controller: cannot start: {failed}", file=sys.stderr)
        return 1
    except (LeadershipLost, CacheSyncTimeout) as stopped:
        # Expected ways to stop: exit non-zero and let the Deployment restart the pod.
        print(f"llmkube controller stopped: {stopped}", file=sys.stderr)
        return 1
    except ConfigError as unusable:  # the kubeconfig or in-cluster configuration, with its reason
        print(f"llmkube controller: cannot connect to the cluster: {unusable}", file=sys.stderr)
        return 2
    return 0
