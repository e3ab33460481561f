"""llmkube.kube."""
