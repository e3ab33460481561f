"""A ModelRouter's decisions, as pure functions and small state machines with explicit time.

What the controller decides (`validation`, `objects`, `status`) and what the router process decides
for each request (`config` compiles the spec the router watches; then `requests`, `classify` and
`detector`, `matching`, `strategy`, `balancer`, `timeouts`, `quarantine`, `latency`, `budgets`,
`usage`, `providers`, `errors`, `audit`); `endpoints` reads EndpointSlices. Nothing here does I/O: the
router process (`llmkube.router`) and the controller (`llmkube.controllers.modelrouter`) do.
"""
