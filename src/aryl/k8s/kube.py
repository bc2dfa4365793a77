"""A thin REST layer over the official ``kubernetes`` client: JSON dicts in and out, watch
streams, and the log of the writes' resourceVersions (:class:`WriteLog`, for the cache).

Every call goes through :meth:`Kube.request` (one HTTP request, counted per verb and
resource in :attr:`Kube.calls`), so that a test can inject faults in one place and the
benchmark can count API calls.  Responses are parsed as plain JSON (the client's model
classes are slow on thousands of pods).  The ``kubernetes`` package is imported lazily.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

from aryl.errors import ArylError

__all__ = ["ApiError", "Kube", "WriteLog", "iter_events", "load_api_client", "require_kubernetes",
           "resource_version"]

log = logging.getLogger(__name__)

INSTALL_HINT = "the kubernetes client is not installed: pip install 'aryl[k8s]'"


def require_kubernetes() -> Any:
    """The ``kubernetes`` module, or ArylError saying how to install it."""
    try:
        import kubernetes
    except ImportError:
        raise ArylError(INSTALL_HINT) from None
    return kubernetes


class ApiError(ArylError):
    """An API request failed: ``status`` is the HTTP code (0: no answer)."""

    def __init__(self, status: int, reason: str, method: str, path: str) -> None:
        super().__init__(f"{method} {path}: {status} {reason}")
        self.status = status
        self.reason = reason


def load_api_client(kubeconfig: str | None) -> Any:
    """An ``ApiClient`` from a kubeconfig file, or the in-cluster service account."""
    k = require_kubernetes()
    if kubeconfig:
        return k.config.new_client_from_config(config_file=str(kubeconfig))
    k.config.load_incluster_config()
    return k.client.ApiClient()


class Kube:
    """JSON requests against one API server in one namespace.

    Parameters
    ----------
    api_client : kubernetes.client.ApiClient
    namespace : str
        Namespace of the TrainingJobs, their pods, Events, ConfigMaps and the Lease.
    timeout_s : float
        Per-request timeout, seconds.
    """

    def __init__(self, api_client: Any, namespace: str, timeout_s: float = 10.0) -> None:
        self.api_client = api_client
        self.namespace = namespace
        self.timeout_s = timeout_s
        self.calls: Counter[str] = Counter()
        #: the resourceVersions of this connection's writes (the cache's freshness rule)
        self.writes = WriteLog()

    def clone(self) -> Kube:
        """A connection of its own (a new HTTP pool) to the same server and namespace."""
        k = require_kubernetes()
        return Kube(k.client.ApiClient(configuration=self.api_client.configuration),
                    self.namespace, self.timeout_s)

    # -- the one request ----------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None,
                content_type: str = "application/json") -> Any:
        """Send one request; the parsed JSON answer (None for an empty body).

        Raises
        ------
        ApiError
            Any non-2xx answer (``status`` the HTTP code) or no answer (``status`` 0).
        """
        k = require_kubernetes()
        import urllib3

        self.calls[f"{method} {_resource(path)}"] += 1
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        qp = list((query or {}).items())
        try:
            if hasattr(self.api_client, "param_serialize"):  # clients >= 30 (generator v7)
                req = self.api_client.param_serialize(
                    method, path, query_params=qp, header_params=headers, body=body,
                    auth_settings=["BearerToken"])
                resp = self.api_client.call_api(*req, _request_timeout=self.timeout_s)
                resp.read()
                if not 200 <= resp.status <= 299:
                    raise k.client.exceptions.ApiException(http_resp=resp)
            else:  # pragma: no cover - older clients
                resp = self.api_client.call_api(
                    path, method, query_params=qp, header_params=headers, body=body,
                    auth_settings=["BearerToken"], _preload_content=False,
                    _return_http_data_only=True, _request_timeout=self.timeout_s)
        except k.client.exceptions.ApiException as exc:
            reason = exc.reason or ""
            with contextlib.suppress(TypeError, ValueError, AttributeError):
                reason = json.loads(exc.body).get("message", reason)
            raise ApiError(int(exc.status or 0), str(reason), method, path) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiError(0, f"no answer ({type(exc).__name__})", method, path) from None
        data = resp.data
        out = json.loads(data) if data else None
        if method != "GET":
            self.writes.note(_resource(path).split("/")[0], method, path, out)
        return out

    def stream(self, path: str, query: dict[str, Any], read_timeout_s: float,
               hold: Any = None) -> Iterator[dict[str, Any]]:
        """A watch: the events (parsed JSON) of one streamed GET, until the server ends it.

        ``hold._resp`` is set to the open answer while it streams (so that another thread
        can close it).

        Raises
        ------
        ApiError
            A non-200 answer (``status`` the HTTP code) or no answer (``status`` 0); a
            connection broken mid-stream raises the urllib3/OS error itself.
        """
        k = require_kubernetes()
        import urllib3

        self.calls[f"WATCH {_resource(path)}"] += 1
        headers = {"Accept": "application/json"}
        try:
            req = self.api_client.param_serialize(
                "GET", path, query_params=list(query.items()), header_params=headers,
                auth_settings=["BearerToken"])
            resp = self.api_client.call_api(*req, _request_timeout=(self.timeout_s,
                                                                    read_timeout_s))
        except k.client.exceptions.ApiException as exc:  # pragma: no cover - not raised
            raise ApiError(int(exc.status or 0), str(exc.reason), "WATCH", path) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiError(0, f"no answer ({type(exc).__name__})", "WATCH", path) from None
        raw = resp.response
        if resp.status != 200:
            reason = str(resp.reason or "")
            with contextlib.suppress(TypeError, ValueError, AttributeError):
                reason = json.loads(raw.read()).get("message", reason)
            raw.release_conn()
            raise ApiError(int(resp.status), reason, "WATCH", path)
        if hold is not None:
            hold._resp = raw
        try:
            yield from iter_events(raw)
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise ApiError(0, f"watch broken ({type(exc).__name__})", "WATCH", path) from None
        finally:
            if hold is not None:
                hold._resp = None
            with contextlib.suppress(Exception):
                raw.release_conn()

    # -- paths -------------------------------------------------------------------
    def ns_path(self, resource: str, name: str = "", sub: str = "", group: str = "") -> str:
        base = f"/apis/{group}" if group else "/api/v1"
        p = f"{base}/namespaces/{self.namespace}/{resource}"
        if name:
            p += f"/{name}"
        if sub:
            p += f"/{sub}"
        return p

    def get_or_none(self, path: str) -> Any:
        try:
            return self.request("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise


def _resource(path: str) -> str:
    """``pods``, ``pods/binding``, ``nodes``, ... of an API path (for the call counts)."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    if "namespaces" in parts:
        i = parts.index("namespaces")
        rest = parts[i + 2:]
        if not rest:
            return "namespaces"
    else:
        i = 1 if parts[:1] == ["api"] else 2
        rest = parts[i + 1:] if parts[0] == "api" else parts[3:]
    if not rest:
        return "?"
    return rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")


def resource_version(obj: dict[str, Any]) -> int:
    """An object's ``metadata.resourceVersion`` as an integer (0 if it has none).  Opaque
    to clients in general; with etcd 3 it is etcd's revision, which the cache's freshness
    rule compares along one collection's watch (docs/kubernetes.md, "The cache")."""
    return int((obj.get("metadata") or {}).get("resourceVersion") or 0)


class WriteLog:
    """The resourceVersions of writes, per kind (``pods``, ``nodes``, ``configmaps``,
    ``trainingjobs``): the newest object version written (``rv``) and the objects deleted
    at once (``gone``: name -> the deleted object's uid, ``""`` if the answer had none).

    A write whose answer carries no object (a Binding, an Eviction: a ``Status``) is not
    logged.
    """

    def __init__(self) -> None:
        self.rv: dict[str, int] = {}
        self.gone: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    def note(self, kind: str, method: str, path: str, answer: Any) -> None:
        """Log one successful write's answer (``kind`` the collection)."""
        if not isinstance(answer, dict):
            return
        meta = answer.get("metadata") or {}
        with self._lock:
            if method == "DELETE" and (answer.get("kind") == "Status"
                                       or meta.get("deletionGracePeriodSeconds") in (0, None)):
                # deleted at once: the answer is the object before its DELETED event (or a
                # Status naming it): that object (its uid) must be gone
                det = answer.get("details") or {}
                name = meta.get("name") or det.get("name") or path.rstrip("/").rsplit("/", 1)[-1]
                uid = meta.get("uid") or det.get("uid") or ""
                self.gone.setdefault(kind, {})[str(name)] = str(uid)
                return
            if "resourceVersion" in meta:
                self.rv[kind] = max(self.rv.get(kind, 0), resource_version(answer))

    def take(self) -> dict[str, Any]:
        """Everything logged, as the JSON of ``data.after``, and forget it."""
        with self._lock:
            kinds = sorted(set(self.rv) | set(self.gone))
            out = {k: {"rv": self.rv.get(k, 0), "gone": dict(self.gone.get(k, {}))}
                   for k in kinds}
            self.rv.clear()
            self.gone.clear()
        return out

    def peek(self) -> dict[str, Any]:
        """Like :meth:`take` without forgetting."""
        with self._lock:
            kinds = sorted(set(self.rv) | set(self.gone))
            return {k: {"rv": self.rv.get(k, 0), "gone": dict(self.gone.get(k, {}))}
                    for k in kinds}

    def prune(self, kind: str, names: list[str]) -> None:
        """Forget deletions that have been seen."""
        with self._lock:
            g = self.gone.get(kind, {})
            for n in names:
                g.pop(n, None)


def iter_events(resp: Any) -> Iterator[dict[str, Any]]:
    """The JSON watch events of a streamed answer (one per line)."""
    from kubernetes.watch.watch import iter_resp_lines

    for line in iter_resp_lines(resp):
        if line:
            yield json.loads(line)
