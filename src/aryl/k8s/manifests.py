"""Create or replace the objects of a YAML manifest (the few kinds Aryl ships and uses).

A minimal ``kubectl apply`` for ``deploy/*.yaml`` and TrainingJob files: each document is
created, or replaced when it exists (``dry_run`` asks the API server for a server-side
dry run: validated and admitted, not stored).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aryl.errors import InvalidInputError
from aryl.k8s.kube import ApiError, Kube

__all__ = ["apply_file", "apply_manifest", "load_manifests", "object_path"]

# kind -> (API prefix, plural, namespaced)
_KINDS: dict[str, tuple[str, str, bool]] = {
    "Namespace": ("/api/v1", "namespaces", False),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "Pod": ("/api/v1", "pods", True),
    "Node": ("/api/v1", "nodes", False),
    "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions",
                                 False),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "TrainingJob": ("/apis/aryl.io/v1alpha1", "trainingjobs", True),
}


def load_manifests(path: str | Path) -> list[dict[str, Any]]:
    """The YAML documents of ``path`` (empty documents skipped).

    Raises
    ------
    InvalidInputError
        Unreadable file, invalid YAML, or a document that is not an object with a kind
        (naming the file and the document's position).
    """
    import yaml

    p = Path(path)
    try:
        docs = list(yaml.safe_load_all(p.read_text(encoding="utf-8")))
    except OSError as exc:
        raise InvalidInputError(f"{p}: cannot read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise InvalidInputError(f"{p}: not valid YAML ({exc})") from None
    out = []
    for i, d in enumerate(docs):
        if d is None:
            continue
        if not isinstance(d, dict) or "kind" not in d:
            raise InvalidInputError(f"{p}: document {i + 1} is not an object with a kind")
        out.append(d)
    return out


def object_path(doc: dict[str, Any], namespace: str) -> tuple[str, str]:
    """``(collection path, object path)`` of a manifest object."""
    kind = doc.get("kind")
    if kind not in _KINDS:
        raise InvalidInputError(f"kind {kind!r} is not one aryl applies; known: {sorted(_KINDS)}")
    prefix, plural, namespaced = _KINDS[str(kind)]
    meta = doc.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise InvalidInputError(f"{kind}: metadata.name is required")
    if namespaced:
        ns = meta.get("namespace") or namespace
        coll = f"{prefix}/namespaces/{ns}/{plural}"
    else:
        coll = f"{prefix}/{plural}"
    return coll, f"{coll}/{name}"


def apply_manifest(kube: Kube, doc: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
    """Create ``doc``, or replace it when it exists; the object the API server returns."""
    coll, path = object_path(doc, kube.namespace)
    q = {"dryRun": "All"} if dry_run else None
    try:
        return dict(kube.request("POST", coll, doc, query=q))
    except ApiError as exc:
        if exc.status != 409:
            raise
    cur = kube.request("GET", path)
    body = dict(doc)
    body["metadata"] = {**doc.get("metadata", {}),
                        "resourceVersion": cur["metadata"]["resourceVersion"]}
    return dict(kube.request("PUT", path, body, query=q))


def apply_file(kube: Kube, path: str | Path, *, dry_run: bool = False) -> list[str]:
    """Apply every document of a YAML file; ``kind/name`` of each."""
    out = []
    for d in load_manifests(path):
        apply_manifest(kube, d, dry_run=dry_run)
        out.append(f"{d['kind']}/{d['metadata']['name']}")
    return out
