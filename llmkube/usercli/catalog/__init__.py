"""The model catalog shipped in the package: well-known GGUF models (models.yaml, facts from their
public model cards) that `llmkube catalog list|info` shows and `llmkube deploy ID` deploys.

Modules: `entries` reads and checks the file and makes each entry's Model and InferenceService
and its memory estimate (pure); `command` prints them (no cluster needed).
"""
