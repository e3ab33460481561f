"""llmkube.api."""
