"""How each kind we write is applied beyond a plain forced server-side apply (field_policy.py).

* Deployment: the selector is immutable, so a change is answered by delete + recreate (pods restart
  once; the planner normally does this itself for the `{app}` selectors of the reference operator
  before 0.8: https://github.com/defilantech/LLMKube/issues/606). The strategy is ours
  alone: the intent spells out the server's RollingUpdate default for CPU services and `Recreate`
  for GPU ones, so switching removes a `rollingUpdate` block whoever wrote or defaulted it (the
  server refuses `rollingUpdate` next to `Recreate`). `spec.replicas` goes to the HPA through a
  hand-over manager when autoscaling starts, so the count never drops to the default of 1.
* Service and HPA: nothing immutable that we set (`clusterIP` is the server's).
* PriorityClass: `value` and `preemptionPolicy` are immutable; drift is repaired by recreating.
* The metal Services' ConfigMap (plan/inferenceservice/metal_services.py): its `data` is the
  controller's alone, so an entry anyone else adds (a Service listed by hand) is removed.

The Deployment, Service and HPA adopt the fields of the reference operator (controller-runtime's
default field manager `manager`, create/update calls): once ours, fields it set and we do not (an
annotation removed from `podAnnotations`, a non-default `sessionAffinity`) are removed by our next
apply instead of staying for ever. Only objects that the InferenceService controls are ever
applied (an object of that name with another controller is never touched), so adoption cannot take
over anyone else's object.
"""

from llmkube.kube.apply import FieldPolicy

#: controller-runtime names the field manager after the binary: the reference's is `manager`.
REFERENCE_FIELD_MANAGER = "manager"
_ADOPT = frozenset({REFERENCE_FIELD_MANAGER})

DEPLOYMENT_POLICY = FieldPolicy(
    recreate_on=frozenset({"spec.selector"}),
    exclusive=(("spec", "strategy"),),
    hand_over=(("spec", "replicas"),),
    adopt_from=_ADOPT,
)
SERVICE_POLICY = FieldPolicy(adopt_from=_ADOPT)
HPA_POLICY = FieldPolicy(adopt_from=_ADOPT)
PRIORITY_CLASS_POLICY = FieldPolicy(recreate_on=frozenset({"value", "preemptionPolicy"}))
METAL_SERVICES_POLICY = FieldPolicy(exclusive=(("data",),))

POLICIES_BY_KIND = {
    "Deployment": DEPLOYMENT_POLICY,
    "Service": SERVICE_POLICY,
    "HorizontalPodAutoscaler": HPA_POLICY,
    "PriorityClass": PRIORITY_CLASS_POLICY,
}
