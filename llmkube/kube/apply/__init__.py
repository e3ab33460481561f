"""Server-side apply with one field manager: `applier` (apply only when the fields we own differ;
create when missing), `compare` (our owned fields against what we want), `field_policy` and
`field_transfer` (what a kind needs beyond it: recreate on an immutable change, take fields over,
hand a field to another manager), `recent_applies`, `ownership` (never take over an object someone
else made), `service_ports` (repair ports another writer replaced). Imports the REST client."""

from typing import TYPE_CHECKING

from llmkube.faces import lazy_face

if TYPE_CHECKING:  # the type checker reads the face here (pyproject.toml: implicit_reexport)
    from llmkube.kube.apply.applier import Applier, ApplyResult
    from llmkube.kube.apply.field_policy import NO_POLICY, FieldPolicy
    from llmkube.kube.apply.ownership import NotOurs, refuse_foreign
    from llmkube.kube.apply.recent_applies import recent_key
    from llmkube.kube.apply.service_ports import restore_service_ports, stray_service_ports
else:
    __all__, __getattr__ = lazy_face(
        __name__,
        {
            "applier": "Applier ApplyResult",
            "field_policy": "FieldPolicy NO_POLICY",
            "ownership": "NotOurs refuse_foreign",
            "recent_applies": "recent_key",
            "service_ports": "restore_service_ports stray_service_ports",
        },
    )
