"""A Model's plan, one module per kind of source: each owns what it decides about its kind and
returns the `ModelDecision` of that kind alone (plan/model/planner.py picks the module, then adds
the cache clear and the summary conditions).

| module | sources |
|---|---|
| `pvc.py` | `pvc://<claim>/<path>`: a claim the pods mount |
| `local.py` | a local path the controller copies into its cache, within `--model-local-roots` |
| `hf.py` | a whole Hugging Face repository, which the runtime resolves |
| `downloaded.py` | what the model downloader fetches: http(s), a repository's `files`, s3:// |
| `metal.py` | what differs for a Model the host agent serves: what it fetches, stages and reads |

They import none of each other (import-linter holds it, pyproject.toml), only the steps below
them in plan/model: the inputs, phases, drift, the prefetch step, conditions.
"""
