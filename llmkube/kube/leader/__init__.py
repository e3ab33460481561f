"""Leader election on a Lease, as client-go's leaderelection: `election` (acquire, renew, release),
`state` (the Lease's record and timing, pure), `leadership` (whether this process leads now: the
write guard every mutating request asks). Imports the REST client."""

from typing import TYPE_CHECKING

from llmkube.faces import lazy_face

if TYPE_CHECKING:  # the type checker reads the face here (pyproject.toml: implicit_reexport)
    from llmkube.kube.leader.election import LeaderElector, LeadershipLost
    from llmkube.kube.leader.leadership import NotLeader
    from llmkube.kube.leader.state import LeaderElectionTiming
else:
    __all__, __getattr__ = lazy_face(
        __name__,
        {
            "election": "LeaderElector LeadershipLost",
            "leadership": "NotLeader",
            "state": "LeaderElectionTiming",
        },
    )
