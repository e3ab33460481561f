"""The router's HTTP/1.1, both ways: the server clients talk to and the pool of connections to
backends, on asyncio protocols with llhttp's parser (httptools).

Why not aiohttp, which the rest of llmkube uses: a relayed stream is a few hundred small chunks, and
through aiohttp each one woke a coroutine on each side, went through a stream reader and was framed
again by a stream writer: 4.4 ms of the router's CPU per 200-token stream against 1.1 ms for a byte
relay, and a time to first byte 1.3 ms longer than going direct with 64 streams open
(bench/bench_router.py). Here a chunk is a callback from the backend's connection to the client's:
parsed in C, looked at for its usage, framed and written, with no task switch. What decides (rules,
budgets, retries) stays in llmkube.router.proxy and llmkube.plan.router; this package knows nothing
of routing."""
