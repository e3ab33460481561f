"""What the router's HTTP server refused and cut, counted for its metrics."""

__all__ = ["ServerStats"]


class ServerStats:
    """What the server refused and cut (counters for the metrics; read at scrape time)."""

    __slots__ = ("closed", "refused")

    def __init__(self) -> None:
        #: requests or connections refused, by reason: head_too_large, malformed, connections,
        #: client_connections, body_budget
        self.refused: dict[str, int] = {}
        #: connections the server closed, by reason: idle_timeout, head_timeout, write_timeout
        self.closed: dict[str, int] = {}

    def refuse(self, reason: str) -> None:
        self.refused[reason] = self.refused.get(reason, 0) + 1

    def close(self, reason: str) -> None:
        self.closed[reason] = self.closed.get(reason, 0) + 1
