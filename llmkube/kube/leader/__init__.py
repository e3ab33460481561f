"""Leader election on a Lease, as client-go's leaderelection: `election` (acquire, renew, release),
`state` (the Lease's record and timing, pure), `leadership` (whether this process leads now: the
write guard every mutating request asks). Imports the REST client."""
