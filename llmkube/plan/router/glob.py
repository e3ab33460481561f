"""Model-name globs of `match.models`: `*` any run of characters (a `/` too: "meta-llama/*" and "*"
match "meta-llama/Llama-3"), `?` one character, `[...]` a class, `\\` quotes the next character.
Compiled once per spec; matching is one anchored regex match."""

import re
from dataclasses import dataclass, field


def _translate(pattern: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        i += 1
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "\\" and i < len(pattern):
            out.append(re.escape(pattern[i]))
            i += 1
        elif char == "[":
            end = pattern.find("]", i + 1 if i < len(pattern) and pattern[i] in "!^" else i)
            if end < 0:
                out.append(re.escape(char))
                continue
            body = pattern[i:end]
            i = end + 1
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            out.append("[" + ("^" if negate else "") + body.replace("\\", "\\\\") + "]")
        else:
            out.append(re.escape(char))
    return "".join(out)


@dataclass(frozen=True)
class Glob:
    pattern: str
    _regex: "re.Pattern[str]" = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            regex = re.compile(_translate(self.pattern), re.DOTALL)
        except re.error:  # an odd class such as [z-a]: matched literally
            regex = re.compile(re.escape(self.pattern))
        object.__setattr__(self, "_regex", regex)

    def matches(self, text: str) -> bool:
        return self._regex.fullmatch(text) is not None

    @property
    def literal(self) -> bool:
        """No glob syntax: exactly one model name (listed by /v1/models)."""
        return not any(c in self.pattern for c in "*?[\\")
