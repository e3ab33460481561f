"""The API contract: the InferenceService schema of the reference operator (v0.8.1 to v0.8.7), fixed."""
