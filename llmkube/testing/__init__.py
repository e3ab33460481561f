"""llmkube.testing."""
