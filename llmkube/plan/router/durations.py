"""Go durations, as the spec writes them: the one parser is llmkube.plan.durations (the
InferenceService planner reads an annotation in the same notation)."""

from llmkube.plan.durations import format_duration, parse_duration

__all__ = ["format_duration", "parse_duration"]
