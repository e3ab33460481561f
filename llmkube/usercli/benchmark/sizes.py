"""The prompt and answer sizes of `llmkube benchmark NAME` when none is given: 128 + 128 tokens,
or less when the service's slots are smaller (pure).

llama.cpp splits `--ctx-size` between its `--parallel` slots (4 when neither the spec nor its
extraArgs say: llama.cpp's automatic choice), and a request longer than its slot fails: `400` for a
prompt that does not fit, an error chunk (`Context size has been exceeded`) for an answer that
outgrows it. So the defaults leave room for the chat template and fit one slot; an explicit
`--prompt-tokens` or `--max-tokens` is the user's and is sent as it is.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from llmkube.api.inferenceservice import InferenceServiceSpec

DEFAULT_PROMPT_TOKENS = 128
DEFAULT_MAX_TOKENS = 128
#: llama.cpp's slots when the server is not told (`--parallel -1`: automatic, 4)
LLAMACPP_AUTO_SLOTS = 4
#: what the chat template and the system's words add to a prompt, and a word's spare tokens
TEMPLATE_TOKENS = 16


@dataclass(frozen=True)
class Sizes:
    prompt_tokens: int
    max_tokens: int
    #: why they are smaller than the defaults ("" when they are the defaults or the user's)
    note: str = ""
    #: the slot the sizes were fitted to (tokens), when they were
    slot: int | None = None


def words_that_fit(slot: int, answer: int, template_tokens: int, tokens_for_words: tuple[int, int]) -> int:
    """How many words of synthetic prompt fit a slot with the answer, from the server's own count
    of a templated prompt: `tokens_for_words` is (words, their tokens, template excluded)."""
    words, tokens = tokens_for_words
    room = slot - answer - template_tokens - 2  # a token or two of rounding
    per_word = max(tokens / max(words, 1), 1e-6)
    return max(1, int(room / per_word))


def _flag(extra: Sequence[str], *names: str) -> int | None:
    """The last value of a numeric flag in extraArgs (`--ctx-size 512`, `--ctx-size=512`, `-c 512`)."""
    found: int | None = None
    for index, arg in enumerate(extra):
        name, equals, value = arg.partition("=")
        if name not in names:
            continue
        text = value if equals else (extra[index + 1] if index + 1 < len(extra) else "")
        if text.lstrip("-").isdigit():
            found = int(text)
    return found


def slot_tokens(spec: InferenceServiceSpec | None) -> tuple[int, int] | None:
    """(context, slots) of a llama.cpp service whose context is known; None otherwise."""
    if spec is None or (spec.runtime or "llamacpp") not in ("llamacpp",):
        return None
    extra = list(spec.extra_args or [])
    context = _flag(extra, "--ctx-size", "-c") or spec.context_size
    if not context or context <= 0:
        return None
    slots = _flag(extra, "--parallel", "-np") or spec.parallel_slots or LLAMACPP_AUTO_SLOTS
    return context, max(1, slots)


def fitted_sizes(
    spec: InferenceServiceSpec | None, prompt_tokens: int | None, max_tokens: int | None
) -> Sizes:
    prompt = prompt_tokens if prompt_tokens is not None else DEFAULT_PROMPT_TOKENS
    answer = max_tokens if max_tokens is not None else DEFAULT_MAX_TOKENS
    slots = slot_tokens(spec)
    if slots is None or (prompt_tokens is not None and max_tokens is not None):
        return Sizes(prompt, answer)
    context, count = slots
    per_slot = context // count
    room = max(2, per_slot - TEMPLATE_TOKENS)
    if prompt + answer <= room:
        return Sizes(prompt, answer)
    if prompt_tokens is None and max_tokens is None:
        prompt, answer = max(1, room // 3), max(1, room // 2)
    elif prompt_tokens is None:
        prompt = max(1, min(prompt, room - answer))
    else:
        answer = max(1, min(answer, room - prompt))
    note = (
        f"sized to fit one slot: contextSize {context} over {count} slot(s) is {per_slot} tokens each; "
        f"prompts of ~{prompt} tokens, {answer} output tokens (--prompt-tokens and --max-tokens choose)"
    )
    return Sizes(prompt, answer, note, slot=per_slot)
