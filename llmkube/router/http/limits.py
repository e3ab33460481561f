"""What the router's HTTP server holds its clients to: a module of its own, with no import, so that
the command line's flags can show the defaults without loading the server."""

from dataclasses import dataclass

__all__ = ["Limits"]


@dataclass(frozen=True)
class Limits:
    #: the request line and headers together (nginx's largest header buffers: 4 x 8 KiB)
    max_head_bytes: int = 32 << 10
    max_headers: int = 128
    #: seconds a connection may sit between requests, or take to send one whole
    idle_timeout: float = 75.0
    #: seconds from a head's first byte to its last
    head_timeout: float = 20.0
    #: seconds a client's full socket buffer may stay full (the client reads nothing)
    write_timeout: float = 60.0
    #: connections open at once, and from one client address (0: no cap of its own)
    max_connections: int = 1024
    max_connections_per_client: int = 256
    #: bytes of request bodies held at once on every connection together
    body_budget: int = 96 << 20
