"""Events (events.k8s.io/v1) as client-go's recorder writes them: `recorder` (one Event per
reason, object and message, patched as a series when it repeats), `series` (names and
aggregation), `backlog` (a bounded queue of writes, so a burst never holds up reconciles). Writes
only while this process leads."""
