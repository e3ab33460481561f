"""llmkube.controllers."""
