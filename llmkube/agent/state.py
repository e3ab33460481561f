"""The agent's state file: the server processes it started, so that a restarted agent finds them
and adopts them (or stops them) instead of loading a second copy of any model.

`<state-dir>/servers.json`, rewritten atomically (a temporary file renamed over it) whenever the
set of servers changes. A record is trusted only for a process that still runs with the start
time and command line recorded (`host.process_fingerprint`): a pid reused by another program is
never signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import structlog

log = structlog.get_logger("llmkube.agent.state")

STATE_FILE = "servers.json"
VERSION = 1


@dataclass(frozen=True)
class ServerRecord:
    key: str  # namespace/name of the InferenceService
    uid: str  # its uid when the server was started (a service recreated under the name is another)
    role: str  # "current" or "next" (a roll in progress)
    pid: int
    port: int
    command: tuple[str, ...]
    identity: str  # what it serves, whatever its port (launch.command_identity)
    fingerprint: str
    log_path: str
    need: int
    source_identity: str  # the model file it loaded (fetch.py)


def load(directory: Path) -> list[ServerRecord]:
    path = directory / STATE_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as error:
        log.warning("the state file cannot be read: no server is adopted", path=str(path), error=str(error))
        return []
    records = []
    for entry in data.get("servers") or () if isinstance(data, dict) else ():
        try:
            records.append(ServerRecord(**{**entry, "command": tuple(entry["command"])}))
        except (TypeError, KeyError):
            log.warning("a state file entry is not understood: skipped", entry=str(entry)[:200])
    return records


def save(directory: Path, records: Iterable[ServerRecord]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / STATE_FILE
    body = {"version": VERSION, "servers": [asdict(r) | {"command": list(r.command)} for r in records]}
    text = json.dumps(body, indent=1, sort_keys=True)
    with contextlib.suppress(OSError):
        if path.read_text() == text:
            return  # nothing changed: nothing written
    temporary = path.with_name(f".{STATE_FILE}.{os.getpid()}")
    with open(temporary, "w") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
