"""`llmkube delete NAME`: the InferenceService, then its Model unless another service uses it."""

import argparse

from llmkube.kube.errors import ApiError, NotFound
from llmkube.usercli.errors import explain
from llmkube.usercli.kinds import INFERENCE_SERVICES, MODELS
from llmkube.usercli.session import Session


async def run_delete(session: Session, args: argparse.Namespace) -> int:
    namespace, name = session.namespace, args.name
    model_name = name
    found_any = False
    try:
        isvc = await session.client.get(INFERENCE_SERVICES, name, namespace)
        model_name = str((isvc.get("spec") or {}).get("modelRef") or name)
        await session.client.delete(INFERENCE_SERVICES, name, namespace)
        print(f'InferenceService "{name}" deleted')
        found_any = True
    except NotFound:
        print(f'InferenceService "{name}" not found in namespace "{namespace}"')
    except ApiError as error:
        raise explain(error, f'deleting InferenceService "{name}"') from error
    if args.keep_model:
        return 0 if found_any else 1
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
        print(f'Model "{model_name}" deleted (cached files stay in the model cache)')
        found_any = True
    except NotFound:
        print(f'Model "{model_name}" not found in namespace "{namespace}"')
    except ApiError as error:
        raise explain(error, f'deleting Model "{model_name}"') from error
    return 0 if found_any else 1
