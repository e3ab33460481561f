"""Files the installed commands read: the manifests `llmkube cluster` / `llmkube run` install and
the script that builds the local control plane.

In a checkout they are read where they are; a wheel carries a copy under `llmkube/_bundled/`
(pyproject.toml, `force-include`), so `pip install .` gives commands that work outside a checkout.
Anything missing is reported by name and by where it was looked for, never as a bare
FileNotFoundError.
"""

from pathlib import Path
from typing import Any

__all__ = ["MissingBundledFile", "bundled_path", "manifest_documents", "source_root"]

_PACKAGE = Path(__file__).resolve().parent
_CHECKOUT = _PACKAGE.parent
_BUNDLE = _PACKAGE / "_bundled"


class MissingBundledFile(FileNotFoundError):
    pass


def source_root() -> Path:
    """The checkout when running from one (editable install, tests), else the packaged copy."""
    if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "manifests").is_dir():
        return _CHECKOUT
    return _BUNDLE


def bundled_path(relative: str) -> Path:
    path = source_root() / relative
    if not path.exists():
        raise MissingBundledFile(
            f"{relative} is not in {source_root()}: this llmkube installation is incomplete "
            "(a wheel must be built by `pip install .` / `pip wheel .` from a checkout, which packages "
            "manifests/ and hack/build-k8s.sh)"
        )
    return path


def manifest_documents(*parts: str) -> list[dict[str, Any]]:
    """The objects in manifests/<part> for each part: a YAML file, or every YAML file of a directory
    (not recursive; kustomization.yaml is not an object)."""
    import yaml  # only `llmkube run` reads manifests: the controller's start does not pay for it

    documents: list[dict[str, Any]] = []
    for part in parts:
        path = bundled_path(f"manifests/{part}")
        files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
        for file in files:
            if file.name != "kustomization.yaml":
                documents += [doc for doc in yaml.safe_load_all(file.read_text()) if doc]
    return documents
