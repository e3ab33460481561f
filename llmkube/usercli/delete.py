"""`llmkube delete NAME`: the InferenceService, then its Model unless another service uses it.

What was deleted goes to stdout; what was not there goes to stderr, and when nothing at all was
deleted the command fails (exit 1), as `kubectl delete` of a missing object does."""

import argparse
import sys

from llmkube.kube.errors import ApiError, NotFound
from llmkube.usercli.errors import NotFoundError, explain
from llmkube.usercli.kinds import INFERENCE_SERVICES, MODELS
from llmkube.usercli.session import Session


async def run_delete(session: Session, args: argparse.Namespace) -> int:
    namespace, name = session.namespace, args.name
    model_name = name
    service_found = False
    try:
        isvc = await session.client.get(INFERENCE_SERVICES, name, namespace)
        model_name = str((isvc.get("spec") or {}).get("modelRef") or name)
        await session.client.delete(INFERENCE_SERVICES, name, namespace)
        print(f'InferenceService "{name}" deleted')
        service_found = True
    except NotFound:
        if args.keep_model:
            raise NotFoundError(f'InferenceService "{name}" not found in namespace "{namespace}"') from None
    except ApiError as error:
        raise explain(error, f'deleting InferenceService "{name}"') from error
    if args.keep_model:
        return 0
    try:
        users = [
            s["metadata"]["name"]
            for s in await session.client.list_all(INFERENCE_SERVICES, namespace)
            if (s.get("spec") or {}).get("modelRef") == model_name and s["metadata"]["name"] != name
        ]
        if users:
            print(f'Model "{model_name}" kept: still used by {", ".join(sorted(users))}')
            return 0
        await session.client.delete(MODELS, model_name, namespace)
    except NotFound:
        if not service_found:
            raise NotFoundError(
                f'no InferenceService or Model "{name}" found in namespace "{namespace}"'
            ) from None
        print(f'Model "{model_name}" not found in namespace "{namespace}"', file=sys.stderr)
        return 0
    except ApiError as error:
        raise explain(error, f'deleting Model "{model_name}"') from error
    if not service_found:  # a Model left behind (a deploy that stopped at the memory-fit check)
        print(f'InferenceService "{name}" not found in namespace "{namespace}"', file=sys.stderr)
    print(f'Model "{model_name}" deleted (cached files stay in the model cache)')
    return 0
