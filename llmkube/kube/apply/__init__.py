"""Server-side apply with one field manager: `applier` (apply only when the fields we own differ;
create when missing), `compare` (our owned fields against what we want), `field_policy` and
`field_transfer` (what a kind needs beyond it: recreate on an immutable change, take fields over,
hand a field to another manager), `recent_applies`, `ownership` (never take over an object someone
else made), `service_ports` (repair ports another writer replaced). Imports the REST client."""
