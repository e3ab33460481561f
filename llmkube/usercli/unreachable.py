"""A cluster the commands cannot reach, said in a person's words: which server, and why, decided
from the exception the transport was given (its type and errno), never from its text."""

import errno
import ssl

import aiohttp

from llmkube.kube.rest import TransportError

_ERRNO_REASONS = {
    errno.ECONNREFUSED: "connection refused (is the API server running, is the port right?)",
    errno.EHOSTUNREACH: "no route to the host",
    errno.ENETUNREACH: "the network is unreachable",
    errno.ETIMEDOUT: "the connection timed out",
    errno.ECONNRESET: "the connection was reset",
    errno.EADDRNOTAVAIL: "the address is not available",
}


def reason(error: BaseException) -> str:
    """Why the request got no HTTP answer, from the innermost cause the transport kept."""
    cause = error.__cause__ if isinstance(error, TransportError) and error.__cause__ else error
    if isinstance(cause, aiohttp.ClientConnectorDNSError):
        return "the server's name does not resolve"
    if isinstance(cause, aiohttp.ClientConnectorCertificateError):
        verify = cause.certificate_error
        detail = getattr(verify, "verify_message", "") or ""
        return "its certificate is not trusted" + (f" ({detail})" if detail else "")
    if isinstance(cause, aiohttp.ClientSSLError | ssl.SSLError):
        return "the TLS handshake failed"
    if isinstance(cause, aiohttp.ClientConnectorError):
        return _os_reason(cause.os_error)
    if isinstance(cause, aiohttp.ServerDisconnectedError):
        return "the server closed the connection without answering"
    if isinstance(cause, TimeoutError | aiohttp.ServerTimeoutError):
        return "no answer in time"
    if isinstance(cause, OSError):
        return _os_reason(cause)
    return f"the request failed ({type(cause).__name__})"


def _os_reason(error: OSError) -> str:
    if error.errno in _ERRNO_REASONS:
        return _ERRNO_REASONS[error.errno]
    if isinstance(error, TimeoutError):
        return "the connection timed out"
    return error.strerror or type(error).__name__


class Unreachable(Exception):
    """The API server at `server` gave no answer; str() is the one line the user sees."""

    def __init__(self, server: str, error: BaseException) -> None:
        super().__init__(f"cannot reach the cluster at {server}: {reason(error)}")
        self.server = server
