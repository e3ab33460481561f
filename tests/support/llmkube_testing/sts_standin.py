"""A stand-in for AWS STS's `AssumeRoleWithWebIdentity` (a real HTTP server on loopback): it
checks the web identity token and the role a client sends, answers STS's XML with temporary keys
from `issue` (fresh made-up ones by default, or real ones from an S3 server's own STS: MinIO's
`AssumeRole`), and refuses in STS's words (`AccessDenied`, `InvalidIdentityToken`). Every call is
recorded.

    with running_sts(token="ey...", role="arn:aws:iam::123456789012:role/models") as sts:
        env["AWS_ENDPOINT_URL_STS"] = sts.endpoint
        ...
        assert [call.token for call in sts.calls] == ["ey..."]
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs

__all__ = ["Issued", "StsCall", "StsStandIn", "running_sts"]


@dataclass(frozen=True)
class Issued:
    access_key: str
    secret_key: str
    session_token: str


@dataclass(frozen=True)
class StsCall:
    action: str
    role: str
    session_name: str
    token: str
    duration: str
    issued: Issued | None  # None: refused


@dataclass
class StsStandIn:
    token: str
    role: str
    issue: Callable[[int], Issued]
    endpoint: str = ""
    calls: list[StsCall] = field(default_factory=list)
    #: answer 503 ServiceUnavailable to this many calls first
    unavailable: int = 0
    refused_calls: int = 0


def _made_up(n: int) -> Issued:
    return Issued(f"ASIASTANDIN{n:09d}", f"standin-secret-{n}", f"standin-session-{n}")


def _error(code: str, message: str) -> bytes:
    return (
        '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>'
        f"<Code>{code}</Code><Message>{message}</Message></Error><RequestId>r-1</RequestId></ErrorResponse>"
    ).encode()


def _answer(issued: Issued, role: str, duration: int) -> bytes:
    until = (datetime.now(UTC) + timedelta(seconds=duration)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        '<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
        "<AssumeRoleWithWebIdentityResult>"
        f"<Credentials><AccessKeyId>{issued.access_key}</AccessKeyId>"
        f"<SecretAccessKey>{issued.secret_key}</SecretAccessKey>"
        f"<SessionToken>{issued.session_token}</SessionToken><Expiration>{until}</Expiration></Credentials>"
        f"<AssumedRoleUser><Arn>{role}/s</Arn><AssumedRoleId>AROA:s</AssumedRoleId></AssumedRoleUser>"
        "</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"
    ).encode()


class _Handler(http.server.BaseHTTPRequestHandler):
    sts: StsStandIn
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        form = {
            k: v[0] for k, v in parse_qs(self.rfile.read(length).decode(), keep_blank_values=True).items()
        }
        sts = self.sts
        if sts.unavailable > 0:
            sts.unavailable -= 1
            sts.refused_calls += 1
            self._send(503, _error("ServiceUnavailable", "try again"))
            return
        call = dict(
            action=form.get("Action", ""),
            role=form.get("RoleArn", ""),
            session_name=form.get("RoleSessionName", ""),
            token=form.get("WebIdentityToken", ""),
            duration=form.get("DurationSeconds", ""),
        )
        if call["action"] != "AssumeRoleWithWebIdentity":
            sts.calls.append(StsCall(**call, issued=None))
            self._send(400, _error("InvalidAction", f"Could not find operation {call['action']}"))
        elif call["token"] != sts.token:
            sts.calls.append(StsCall(**call, issued=None))
            self._send(400, _error("InvalidIdentityToken", "The web identity token is not valid"))
        elif call["role"] != sts.role:
            sts.calls.append(StsCall(**call, issued=None))
            self._send(403, _error("AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity"))
        else:
            issued = sts.issue(len(sts.calls))
            sts.calls.append(StsCall(**call, issued=issued))
            self._send(200, _answer(issued, sts.role, int(call["duration"] or 3600)))

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def running_sts(*, token: str, role: str, issue: Callable[[int], Issued] = _made_up) -> Iterator[StsStandIn]:
    sts = StsStandIn(token=token, role=role, issue=issue)
    handler = type("Handler", (_Handler,), {"sts": sts})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    sts.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield sts
    finally:
        server.shutdown()
        server.server_close()
