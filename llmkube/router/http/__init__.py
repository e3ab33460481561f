"""The router's HTTP/1.1, both ways: the server clients talk to and the pool of connections to
backends, on asyncio protocols with llhttp's parser (httptools).

Why not aiohttp, which the rest of llmkube uses: a relayed stream is a few hundred small chunks, and
through aiohttp each one woke a coroutine on each side, went through a stream reader and was framed
again by a stream writer: 4.4 ms of the router's CPU per 200-token stream against 1.1 ms for a byte
relay, and a time to first byte 1.3 ms longer than going direct with 64 streams open
(bench/bench_router.py). Here a chunk is a callback from the backend's connection to the client's:
parsed in C, looked at for its usage, framed and written, with no task switch. What decides (rules,
budgets, retries) is llmkube.plan.router's, performed by llmkube.router; this package knows nothing
of routing (import-linter holds it).

Its face (below) is imported name by name when first used: the command line reads the server's
`Limits` without loading the server."""

from typing import TYPE_CHECKING

from llmkube.faces import lazy_face

if TYPE_CHECKING:  # the type checker reads the face here (pyproject.toml: implicit_reexport)
    from llmkube.router.http.backend import (
        Answer,
        AnswerBroken,
        AnswerSilent,
        ConnectFailed,
        ConnectionBroken,
        Origin,
        Sink,
    )
    from llmkube.router.http.budget import ByteBudget
    from llmkube.router.http.client import InvalidHeader, Pool, Resolve, Route, Tunnel
    from llmkube.router.http.connection import ErrorBody
    from llmkube.router.http.limits import Limits
    from llmkube.router.http.messages import BodyBusy, BodyError, Headers, Request
    from llmkube.router.http.responder import Handler, Responder
    from llmkube.router.http.server import HttpServer
    from llmkube.router.http.stats import ServerStats
else:
    __all__, __getattr__ = lazy_face(
        __name__,
        {
            "budget": "ByteBudget",
            "limits": "Limits",
            "messages": "BodyBusy BodyError Headers Request",
            "server": "HttpServer",
            "connection": "ErrorBody",
            "responder": "Handler Responder",
            "stats": "ServerStats",
            "backend": "Answer AnswerBroken AnswerSilent ConnectFailed ConnectionBroken Origin Sink",
            "client": "InvalidHeader Pool Resolve Route Tunnel",
        },
    )
