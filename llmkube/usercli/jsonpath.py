"""kubectl's `-o jsonpath=TEMPLATE` (pure): text with `{expression}`s, the subset of its syntax
people write in scripts.

  {.metadata.name}                    a field (a leading `.` is optional; `$` is the root)
  {.items[0]} {.items[-1]} {[1:3]}    an index (negative from the end), a slice
  {.items[*].metadata.name}           every element (values printed separated by a space)
  {..name}                            every `name` field, at any depth
  {.metadata.labels['app.kubernetes.io/name']} {.metadata.labels.app\\.kubernetes\\.io/name}
                                      a name with dots, quoted or escaped; {['a','b']} a union
  {.status.conditions[?(@.type=="Ready")].status}   a filter (==, !=, <, <=, >, >=; or a field's presence)
  {range .items[*]}{.metadata.name}{"\\n"}{end}   a loop; {"text"} a literal (\\n \\t escapes)

As in kubectl: a map prints as JSON, a missing field prints nothing (`--allow-missing-template-keys`
is kubectl's default), and a template that cannot be parsed is an error naming where.
"""

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


class JSONPathError(ValueError):
    """A template that cannot be parsed; the message says where."""


@dataclass(frozen=True)
class _Text:
    text: str


@dataclass(frozen=True)
class _Expr:
    steps: tuple["_Step", ...]


@dataclass(frozen=True)
class _Range:
    steps: tuple["_Step", ...]
    body: tuple["_Node", ...]


_Node = _Text | _Expr | _Range


@dataclass(frozen=True)
class _Field:
    name: str  # "*" for every value of a map or list
    recursive: bool = False


@dataclass(frozen=True)
class _Index:
    start: int | None
    stop: int | None
    single: bool
    step: int | None = None


@dataclass(frozen=True)
class _Union:
    names: tuple[str, ...]


@dataclass(frozen=True)
class _Filter:
    left: tuple["_Step", ...]
    op: str  # "" for "the field exists"
    right: Any


_Step = _Field | _Index | _Union | _Filter


def render(template: str, data: Any) -> str:
    """The template applied to `data` (a decoded JSON object)."""
    return "".join(_run(parse(template), data))


def parse(template: str) -> tuple[_Node, ...]:
    nodes, position, closing = _parse_nodes(template, 0, top=True)
    if closing:
        raise JSONPathError(f"{{end}} without {{range}} at character {position}")
    return nodes


def _parse_nodes(template: str, position: int, *, top: bool) -> tuple[tuple[_Node, ...], int, bool]:
    nodes: list[_Node] = []
    while position < len(template):
        start = template.find("{", position)
        if start < 0:
            nodes.append(_Text(template[position:]))
            return tuple(nodes), len(template), False
        if start > position:
            nodes.append(_Text(template[position:start]))
        end = _closing_brace(template, start)
        inner = template[start + 1 : end].strip()
        position = end + 1
        if inner == "end":
            if top:
                raise JSONPathError(f"{{end}} without {{range}} at character {start}")
            return tuple(nodes), position, True
        if inner.startswith("range ") or inner == "range":
            steps = _parse_path(inner[len("range") :].strip(), start)
            body, position, closed = _parse_nodes(template, position, top=False)
            if not closed:
                raise JSONPathError(f"{{range}} at character {start} has no {{end}}")
            nodes.append(_Range(steps, body))
        elif inner.startswith(('"', "'")):
            nodes.append(_Text(_literal(inner, start)))
        else:
            nodes.append(_Expr(_parse_path(inner, start)))
    if not top:
        return tuple(nodes), position, False
    return tuple(nodes), position, False


def _closing_brace(template: str, start: int) -> int:
    quote = ""
    for index in range(start + 1, len(template)):
        char = template[index]
        if quote:
            if char == "\\":
                continue
            if char == quote and template[index - 1] != "\\":
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "}":
            return index
    raise JSONPathError(f"unclosed {{ at character {start}")


def _literal(text: str, where: int) -> str:
    if len(text) < 2 or text[-1] != text[0]:
        raise JSONPathError(f"unterminated string at character {where}")
    body = text[1:-1]
    return body.encode("latin-1", "backslashreplace").decode("unicode_escape")


_NAME = re.compile(r"(?:[A-Za-z0-9_\-$@/]|\\\.)+|\*")


def _name(match: re.Match[str]) -> str:
    return match.group().replace("\\.", ".")


def _parse_path(text: str, where: int) -> tuple[_Step, ...]:
    steps: list[_Step] = []
    index = 0
    if text.startswith("$"):
        index = 1
    while index < len(text):
        char = text[index]
        if text.startswith("..", index):
            match = _NAME.match(text, index + 2)
            if not match:
                raise JSONPathError(f"a name must follow .. at character {where + index}")
            steps.append(_Field(_name(match), recursive=True))
            index = match.end()
        elif char == ".":
            match = _NAME.match(text, index + 1)
            if not match:
                if index + 1 == len(text):  # "{.}": the current object
                    index += 1
                    continue
                raise JSONPathError(f"a name must follow . at character {where + index}")
            steps.append(_Field(_name(match)))
            index = match.end()
        elif char == "[":
            end = _closing_bracket(text, index, where)
            steps.append(_bracket(text[index + 1 : end].strip(), where + index))
            index = end + 1
        elif index == 0 and (match := _NAME.match(text)):
            steps.append(_Field(_name(match)))
            index = match.end()
        else:
            raise JSONPathError(f'unexpected "{char}" at character {where + index}')
    return tuple(steps)


def _closing_bracket(text: str, start: int, where: int) -> int:
    depth, quote = 0, ""
    for index in range(start, len(text)):
        char = text[index]
        if quote:
            if char == quote and text[index - 1] != "\\":
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return index
    raise JSONPathError(f"unclosed [ at character {where + start}")


_SLICE = re.compile(r"^(-?\d*)(?::(-?\d*))?(?::(-?\d*))?$")
_FILTER = re.compile(r"^\?\((.+?)\s*(==|!=|<=|>=|<|>)\s*(.+)\)$|^\?\((.+)\)$")


def _bracket(inner: str, where: int) -> _Step:
    if inner == "*":
        return _Field("*")
    if inner.startswith("?"):
        match = _FILTER.match(inner)
        if not match:
            raise JSONPathError(f"cannot read the filter [{inner}] at character {where}")
        if match.group(4) is not None:
            return _Filter(_filter_path(match.group(4).strip(), where), "", None)
        return _Filter(_filter_path(match.group(1).strip(), where), match.group(2), _value(match.group(3)))
    if inner[:1] in "\"'":
        names = tuple(_literal(part.strip(), where) for part in _split_union(inner))
        return _Union(names)
    if "," in inner:
        return _Union(tuple(part.strip() for part in inner.split(",")))
    match = _SLICE.match(inner)
    if not match:
        raise JSONPathError(f"cannot read the index [{inner}] at character {where}")
    start, stop, step = (int(g) if g not in (None, "") else None for g in match.groups())
    if ":" not in inner:
        if start is None:
            raise JSONPathError(f"empty index [] at character {where}")
        return _Index(start, None, single=True)
    return _Index(start, stop, single=False, step=step)


def _split_union(inner: str) -> list[str]:
    parts, current, quote = [], "", ""
    for char in inner:
        if quote:
            current += char
            if char == quote and not current.endswith("\\" + quote):
                quote = ""
        elif char in "\"'":
            quote = char
            current += char
        elif char == ",":
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def _filter_path(text: str, where: int) -> tuple[_Step, ...]:
    if not text.startswith("@"):
        raise JSONPathError(f'a filter compares a field of "@" at character {where}')
    return _parse_path(text[1:], where)


def _value(text: str) -> Any:
    text = text.strip()
    if text[:1] in "\"'":
        return _literal(text, 0)
    try:
        return json.loads(text)
    except ValueError:
        return text


def _run(nodes: tuple[_Node, ...], data: Any) -> Iterator[str]:
    for node in nodes:
        if isinstance(node, _Text):
            yield node.text
        elif isinstance(node, _Expr):
            yield " ".join(_print(value) for value in _evaluate(node.steps, [data]))
        else:
            for item in _evaluate(node.steps, [data]):
                yield from _run(node.body, item)


def _print(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _evaluate(steps: tuple[_Step, ...], values: list[Any]) -> list[Any]:
    for step in steps:
        values = [found for value in values for found in _apply(step, value)]
    return values


def _apply(step: _Step, value: Any) -> list[Any]:
    if isinstance(step, _Field):
        if step.recursive:
            return list(_descendants(value, step.name))
        return _children(value, step.name)
    if isinstance(step, _Union):
        return [found for name in step.names for found in _children(value, name)]
    if isinstance(step, _Index):
        if not isinstance(value, list):
            return []
        if step.single:
            assert step.start is not None
            index = step.start
            return [value[index]] if -len(value) <= index < len(value) else []
        return list(value[step.start : step.stop : step.step])
    items = value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else []
    return [item for item in items if _matches(step, item)]


def _children(value: Any, name: str) -> list[Any]:
    if name == "*":
        if isinstance(value, dict):
            return list(value.values())
        return list(value) if isinstance(value, list) else []
    if isinstance(value, dict) and name in value:
        return [value[name]]
    if isinstance(value, list) and re.fullmatch(r"-?\d+", name):
        index = int(name)
        return [value[index]] if -len(value) <= index < len(value) else []
    return []


def _descendants(value: Any, name: str) -> Iterator[Any]:
    if isinstance(value, dict):
        if name == "*":
            yield from value.values()
        elif name in value:
            yield value[name]
        for child in value.values():
            yield from _descendants(child, name)
    elif isinstance(value, list):
        for child in value:
            yield from _descendants(child, name)


def _matches(step: _Filter, item: Any) -> bool:
    found = _evaluate(step.left, [item])
    if not step.op:
        return bool(found)
    if not found:
        return False
    left, right = found[0], step.right
    try:
        if step.op == "==":
            return bool(left == right)
        if step.op == "!=":
            return bool(left != right)
        if step.op == "<":
            return bool(left < right)
        if step.op == "<=":
            return bool(left <= right)
        if step.op == ">":
            return bool(left > right)
        return bool(left >= right)
    except TypeError:  # a string against a number: no match, as in kubectl
        return False
