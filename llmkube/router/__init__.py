"""`llmkube router`: the process a ModelRouter's Deployment runs (the controller's image). It
watches its ModelRouter and the EndpointSlices of its InferenceService backends, and serves one
OpenAI-compatible endpoint that routes each request by the spec's rules (the decisions are
llmkube.plan.router's; this package is the I/O around them).

Imports the kube machinery, the process's logging and pure planning; never pydantic (the router
reads the spec as stored): its memory is what it holds for its connections."""
