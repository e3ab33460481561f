"""Controllers as controller-runtime runs them: `controller` (workers calling
`reconcile(key) -> Result`, requeue and backoff), `handlers` and `predicates` (which changes wake
which keys), `status_writer` (write status only when more than its timestamp changed, and follow
the cache so our own writes do not echo), `fairslots` (background work shared fairly between
namespaces). The top of the machinery: may import everything else in `llmkube.kube`."""
