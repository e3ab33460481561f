"""The host agent's decisions (`llmkube agent`, llmkube.agent does its I/O), as pure functions.

* ``assignment``: what the agent does about one InferenceService (serve, stop, remove, keep, refuse);
* ``support``: what it can serve (llama-server, GGUF; the runtimes and formats it cannot);
* ``launch``: the server's command line, from the controller's own argument builder;
* ``supervision``: one server process as a state machine (probes, restarts with backoff, stops);
* ``memory``: the budget, what a service needs (memory_fit's estimate), memory pressure;
* ``admission``: who may start, and whom to evict for it (priority, evictionProtection);
* ``rollout``: a spec change rolled in place (new server ready, endpoint moved, old one drained);
* ``slices``: the EndpointSlice the agent registers, and when it must be written (heartbeat);
* ``artifact``: what the model store answers (the file is there, on its way, or failed);
* ``service``: what the agent does about one service now, from all of the above: one pure step
  (``plan_service``) from what it observed to the actions the agent performs.

They import the InferenceService planner's pieces (the argument builder, memory_fit, the metal
reasons the controller reads) and nothing of the agent's or the controller's processes.
"""
