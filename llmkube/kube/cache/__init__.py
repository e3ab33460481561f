"""The informer cache: `reflector` (list, then watch from the list's resourceVersion, relist on
410 Gone, bookmarks, a `watchdog` for silent watches, the watch stream's `lines`), `store` (indexed,
optionally compact JSON bytes), `informer` (shares one reflector and store among handlers),
`transform` (what is kept of each object). Imports the REST client, nothing above it."""
