"""llmkube.plan."""
