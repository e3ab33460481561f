"""llmkube.plan: every decision the controllers make, as pure functions from plain data (the
objects as read, the operator's settings, the time) to plain data (the objects to apply, the status
to write, the events to announce). Nothing here does I/O or imports the kube machinery.

* ``agent`` and ``router``: the host agent's decisions, and a ModelRouter's (the controller's half:
  its objects, validation, status; the router process's: a request's admission and outcome, and
  the state machines they read), each above the InferenceService's names and objects it reuses;
* ``inferenceservice``: an InferenceService's plan: its Deployment, Service, HPA and cache claim,
  its status, conditions and events, the GPU queue, the checks of what the admin allows;
* ``model``: a Model's plan: where its weights come from and what to do about them;
* ``tenancy``: what an admin allows tenants (flags, namespace labels), read by both;
* ``events``: the Events a plan announces, and when;
* ``conditions``: condition semantics (transitions, the Ready/Reconciling/Stalled summary);
* ``apiserver``: the API server's own rules, ported (validation of what we build, quantities,
  label syntax, Pod Security), knowing nothing about LLMs or llmkube.

Imports point down that list (import-linter holds it, pyproject.toml).
"""
