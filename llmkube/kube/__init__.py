"""llmkube.kube: generic Kubernetes controller machinery (it knows nothing about LLMs).

The pieces, bottom up (each module is named after its concept):

* ``client``: :class:`ApiClient` - one aiohttp session, orjson bodies, typed errors (``errors``),
  raw REST paths from :class:`Resource` descriptors (``resource``), 429/401 handling, request counts.
* ``informer`` / ``reflector`` / ``store``: list+watch into an indexed cache, handlers get
  :class:`Change` s (DELETED may carry a :class:`Tombstone`).
* ``workqueue`` / ``queue_state`` / ``ratelimit``: client-go's workqueue contract with priorities.
* ``controller`` / ``handlers`` / ``predicates``: workers calling ``reconcile(key) -> Result``;
  :class:`Watch` says which changes wake which keys.
* ``apply`` / ``compare`` / ``managed_fields``: server-side apply only when our owned fields differ;
  ``field_policy`` / ``field_transfer``: what a kind needs beyond it (recreate, take over, hand over).
* ``leader_election`` / ``leader_state`` / ``leadership``: a Lease elector, and the write guard the
  client asks before every mutating request; ``events`` / ``event_series`` / ``event_backlog``:
  Events with series aggregation and a bounded write backlog.
* ``blocking``: blocking work in stoppable daemon threads (never holds up a shutdown).

Import each from its module (``from llmkube.kube.client import ApiClient``): the package itself
imports nothing, so a light module (``errors``, ``resource``) does not load the client's aiohttp,
structlog and the rest with it (the user commands' parser builds on them).
"""
