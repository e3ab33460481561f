"""The API server's rules, ported to Python, for the objects the planner builds: what
Kubernetes 1.37 would refuse (`pod_template_rules`, with the syntax of names and labels in
`kube_syntax` and `labels`, keyed lists in `merge_keys`, its error wording in `field_errors`; the
quantities are llmkube.apimachinery's) and what its PodSecurity admission would refuse
(`pod_security`).

A port of someone else's rules, not llmkube's: it imports nothing of ours but the API types
(`llmkube.api`, `llmkube.apimachinery`), so it can be held against the API server itself
(tests/integration) and could serve any controller.
"""
