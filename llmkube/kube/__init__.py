"""llmkube.kube: generic Kubernetes controller machinery, in the shape of client-go and
controller-runtime; it knows nothing about LLMs (import-linter holds that, and the layers below).

* ``rest``: the API client (one aiohttp session, orjson bodies, retries, 429/401 handling), its
  transport, kubeconfig and in-cluster configuration, exec credentials, port-forwarding;
* ``cache``: list+watch (``reflector``) into indexed stores (``store``), shared ``informer`` s,
  the transforms that trim what they keep;
* ``queue``: the rate-limited work queue (client-go's contract, with priorities);
* ``apply``: server-side apply only when our owned fields differ, field policies and transfers,
  never taking over someone else's object;
* ``leader``: Lease leader election and the write guard every mutating request asks;
* ``events``: the Event recorder, with series aggregation and a bounded backlog;
* ``control``: controllers (workers calling ``reconcile(key) -> Result``), what wakes which key
  (``handlers``, ``predicates``), the status writer, fair slots for background work.

The modules beside them are small and used by all: ``types``, ``resource`` (REST paths of a kind),
``errors`` (typed API errors), ``clock``, ``backoff``, ``blocking`` (stoppable daemon threads),
``managed_fields``, ``metrics`` (controller-runtime's metric names) and ``exposition``.

Imports point down that list: control > events > apply, cache, leader > rest, queue. Import each
name from its module (``from llmkube.kube.rest.client import ApiClient``): the packages import
nothing themselves, so a light module (``errors``, ``resource``) does not load the client's aiohttp,
structlog and the rest with it (the user commands' parser builds on them).
"""
