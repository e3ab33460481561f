"""An InferenceService's plan: `planner.plan_inference_service(isvc, model, observed, config)`.

What it builds: the Deployment (`deployment`, with `storage`, `init_scripts`, `probes`,
`resources`, `hardening`, and the container process of each runtime in `runtimes/`), the Service
(`service`), the HPA (`hpa`), the namespace's cache claim (`cache_pvc`).
What it judges: the spec (`validation`, `advice`), what the admin allows (`policy`), what the API
server would refuse in what it built (`object_checks`, with `field_origins` naming the user's field),
whether the Model's status describes its current spec (`current_model`), memory (`memory_fit`).
What it reports: the status (`status`), from the pods (`scheduling`, `pod_failures`, `download`),
the rollout (`rollout`), the GPU queue (`queue`), the metal agent's endpoints (`metal`), failed
writes (`write_failures`); which Services the host agents may write endpoints for
(`metal_services`). `config` and `observed` are its inputs; `names` and `objects` the names,
labels and metadata of the objects it owns; `priority` the five PriorityClasses.
"""
