"""Status conditions as Kubernetes means them: `standard` sets and finds them (lastTransitionTime
moves only when the status flips), `summary` derives the Ready, Reconciling and Stalled conditions
that kstatus, Argo CD and Flux read. Knows nothing about InferenceServices or Models."""
