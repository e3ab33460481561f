"""What the applier does for one kind beyond a forced server-side apply: data the caller passes in.

Server-side apply only ever changes and removes fields the applying manager owns. Some fields need
more than that, and which ones is a property of the kind and of the caller, not of the applier:

* ``recreate_on`` - field paths the API server refuses to change in place (a Deployment's
  ``spec.selector``, a PriorityClass's ``value``), named exactly as the server names them in
  ``Status.details.causes[].field``. A rejection whose every cause is one of them (or below one) is
  answered by deleting the object (guarded by its uid) and applying again. Any other rejection is a
  real one: it is raised for the caller to report.
* ``exclusive`` - subtrees whose content the intent decides alone (a Deployment's ``spec.strategy``):
  whatever the object holds there that the intent does not set is removed, whoever wrote it or
  defaulted it. The intent must then set every field the server would default in that subtree.
* ``hand_over`` - fields we stop setting when someone else takes them over (a Deployment's
  ``spec.replicas`` once an HPA scales it). Dropping a field we alone own would reset it to its
  default; it is first handed to a private manager, as the server-side apply documentation
  describes ("transferring ownership"), so it keeps its value until the new owner writes it.
* ``adopt_from`` - managers whose ``Update`` entries become ours (a predecessor that created the
  objects with create/update calls): once their fields are ours, our apply removes those we do not
  set, instead of leaving them for ever.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmkube.kube.errors import Invalid

__all__ = ["NO_POLICY", "FieldPath", "FieldPolicy"]

#: A field by its map keys from the object's root, e.g. ``("spec", "replicas")``.
FieldPath = tuple[str, ...]


@dataclass(frozen=True)
class FieldPolicy:
    recreate_on: frozenset[str] = frozenset()
    exclusive: tuple[FieldPath, ...] = ()
    hand_over: tuple[FieldPath, ...] = ()
    adopt_from: frozenset[str] = frozenset()

    def answers_by_recreate(self, error: Invalid) -> bool:
        """True when every field the server rejected is one that only a recreate can change."""
        fields = [cause.field for cause in error.causes]
        return bool(fields) and all(self._recreatable(field) for field in fields)

    def _recreatable(self, field: str) -> bool:
        return any(field == path or field.startswith((f"{path}.", f"{path}[")) for path in self.recreate_on)


NO_POLICY = FieldPolicy()
