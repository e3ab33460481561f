"""The vendored API contract (a copy of shared/spec/inferenceservice.schema.json)."""
