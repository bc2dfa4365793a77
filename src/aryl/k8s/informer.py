"""The controller's cache of the cluster: one reflector (list once, then watch) per kind.

A :class:`Reflector` keeps every object of one collection (``/api/v1/nodes``, the
namespace's pods with the label ``aryl.io/job``, its TrainingJobs, its ConfigMaps) in
memory, by name, and the resourceVersion of the last event it applied:

* it **lists** the collection once (one request; the list's resourceVersion), then
  **watches** from that resourceVersion (``allowWatchBookmarks``; the server ends a watch
  after ``timeoutSeconds`` and the reflector watches again from the last resourceVersion
  it saw, bookmarks included);
* a watch answered **410 Gone** (an ``ERROR`` event or the status: the resourceVersion is
  older than the server's watch window, e.g. after an API server restart) makes it list
  again;
* an API server that does not answer (refused, reset, timed out, 5xx) is retried with
  backoff (0.2 s doubling to 10 s); a watch resumes from the last resourceVersion;
* every ``relist_s`` (30 min) it lists again instead of watching again, a level-triggered
  safety net should an event ever be lost.

The decision never waits for an event: a pass takes a :meth:`Reflector.snapshot` of each
kind.  What makes it safe is the **freshness rule** (:meth:`Cache.wait_fresh`): before a
pass reads the cache, every write the pass depends on must have been seen by it.  A write
is known by the resourceVersion of the object the API server answered with
(:class:`aryl.k8s.kube.WriteLog`): the stream of its kind has applied an event at least that new
(resourceVersions of one collection's events increase along a watch), and an object
deleted at once (by its uid) is absent.  The controller's own writes (the decision record
above all) are always waited for; the writes an announcing ConfigMap names
(``data.after``, written by whoever announces: the test harness's clock, an inference
autoscaler) are waited for once the ConfigMap is seen; with the virtual clock, the pass
reads ``aryl-clock`` itself (one small consistent list) and waits until the cache is at
least as new as it.  Without a name, no order between kinds is assumed (a watch of pods
and one of ConfigMaps are separate streams): an input that arrives late is acted on in
the next pass (level-triggered).  A wait that does not end within ``timeout_s`` makes the
reflector list again (and the pass fails, to be retried).
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
import weakref
from typing import Any

from aryl.k8s.kube import ApiError, Kube, resource_version

__all__ = ["Cache", "Reflector", "parse_after"]

log = logging.getLogger(__name__)


def parse_after(text: str | None, where: str) -> dict[str, Any]:
    """``data.after`` of an announcing ConfigMap (JSON ``{kind: {"rv": N, "gone": {name:
    uid}}}``); ``{}`` when absent or malformed (logged, naming ``where``)."""
    if not text:
        return {}
    try:
        doc = json.loads(text)
        out: dict[str, Any] = {}
        for kind, v in doc.items():
            out[str(kind)] = {"rv": int(v.get("rv", 0)),
                              "gone": {str(n): str(u) for n, u in (v.get("gone") or {}).items()}}
        return out
    except (ValueError, TypeError, AttributeError) as exc:
        log.error("%s: data.after is not {kind: {rv, gone}} JSON (%s); ignored", where, exc)
        return {}


class Reflector:
    """Every object of one collection, kept current by a list and a watch (a thread).

    Parameters
    ----------
    kube : Kube
        A connection of its own (a watch holds one HTTP connection).
    kind : str
        The collection's name in the write log (``pods``, ``nodes``, ...).
    path : str
        The collection's API path.
    query : dict, optional
        Extra query parameters (a label selector).
    watch_timeout_s : tuple of float
        The server ends a watch after a random time in this range (s), as client-go does.
    relist_s : float
        List again (rather than watch again) when the last list is this old (s): a
        level-triggered safety net should an event ever be lost.
    """

    def __init__(self, kube: Kube, kind: str, path: str, query: dict[str, str] | None = None,
                 watch_timeout_s: tuple[float, float] = (60.0, 120.0),
                 relist_s: float = 1800.0) -> None:
        self.kube = kube
        self.kind = kind
        self.path = path
        self.query = dict(query or {})
        self.watch_timeout_s = watch_timeout_s
        self.relist_s = relist_s
        self._listed_at = -float("inf")
        self.items: dict[str, dict[str, Any]] = {}
        self.rv = 0
        self.synced = False
        self.n_lists = 0
        self.n_watches = 0
        self.n_events = 0
        self.last_error: str | None = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._relist = True
        self._resp: Any = None
        self._thread: threading.Thread | None = None

    # -- the thread --------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"aryl-watch-{self.kind}",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._interrupt()
        with self._cond:
            self._cond.notify_all()

    def request_relist(self) -> None:
        """List again (ends the current watch)."""
        self._relist = True
        self._interrupt()

    def _interrupt(self) -> None:
        resp = self._resp
        if resp is not None:
            with contextlib.suppress(Exception):
                resp.shutdown()
            with contextlib.suppress(Exception):
                resp.close()

    def _run(self) -> None:
        backoff = 0.0
        while not self._stop.is_set():
            try:
                if self._relist or time.monotonic() - self._listed_at > self.relist_s:
                    self._list()
                self._watch()
                backoff = 0.0
            except ApiError as exc:
                if self._stop.is_set():
                    break
                if self._relist:  # interrupted on purpose
                    continue
                if exc.status == 410:
                    log.info("watch %s: %s; listing again", self.kind, exc)
                    self._relist = True
                    continue
                backoff = min(10.0, max(0.2, 2 * backoff))
                self.last_error = str(exc)
                if not self._stop.is_set():
                    log.warning("watch %s: %s; retrying in %.1f s", self.kind, exc, backoff)
                self._stop.wait(backoff)
            except Exception as exc:  # a reset connection mid-stream, a bad line: list again
                if self._stop.is_set():
                    break
                backoff = min(10.0, max(0.2, 2 * backoff))
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("watch %s: %s; listing again in %.1f s", self.kind,
                            self.last_error, backoff)
                self._relist = True
                self._stop.wait(backoff)

    def _list(self) -> None:
        doc = self.kube.request("GET", self.path, query=self.query or None)
        self._relist = False
        items = {o["metadata"]["name"]: o for o in doc.get("items", [])}
        rv = int(doc["metadata"]["resourceVersion"])
        self._listed_at = time.monotonic()
        with self._cond:
            self.items = items
            self.rv = rv
            self.synced = True
            self.n_lists += 1
            self.last_error = None
            self._cond.notify_all()

    def _watch(self) -> None:
        lo, hi = self.watch_timeout_s
        timeout = int(random.uniform(lo, hi))
        q = {**self.query, "watch": "1", "resourceVersion": str(self.rv),
             "allowWatchBookmarks": "true", "timeoutSeconds": str(timeout)}
        self.n_watches += 1
        t0, n0 = time.monotonic(), self.n_events
        for ev in self.kube.stream(self.path, q, read_timeout_s=timeout + 30.0, hold=self):
            if self._stop.is_set() or self._relist:
                return
            typ = ev.get("type")
            obj = ev.get("object") or {}
            if typ == "ERROR":
                code = int(obj.get("code") or 0)
                raise ApiError(code, str(obj.get("message", "watch error")), "WATCH", self.path)
            rv = resource_version(obj)
            with self._cond:
                if typ == "BOOKMARK":
                    pass
                elif typ == "DELETED":
                    self.items.pop(obj["metadata"]["name"], None)
                else:
                    self.items[obj["metadata"]["name"]] = obj
                self.rv = max(self.rv, rv)
                self.n_events += 1
                self.last_error = None
                self._cond.notify_all()
        if self.n_events == n0 and time.monotonic() - t0 < 1.0 and not self._stop.is_set() \
                and not self._relist:
            raise ApiError(0, "the watch ended at once", "WATCH", self.path)

    # -- the pass's side ----------------------------------------------------------
    def snapshot(self) -> dict[str, dict[str, Any]]:
        """A copy of the objects by name (the objects themselves are not copied: nothing
        changes them, events replace them)."""
        with self._cond:
            return dict(self.items)

    def fresh(self, want: dict[str, Any]) -> tuple[bool, list[str]]:
        """Whether the writes ``want`` (``{"rv": N, "gone": {name: uid}}``) have been seen
        (the stream has applied an event at least ``rv`` new; each deleted object is absent
        or its name is another object's); and the deleted names seen."""
        with self._cond:
            return self._fresh(want)

    def _fresh(self, want: dict[str, Any]) -> tuple[bool, list[str]]:
        if not self.synced or self.rv < int(want.get("rv", 0)):
            return False, []
        seen = []
        ok = True
        for name, uid in (want.get("gone") or {}).items():
            o = self.items.get(name)
            if o is None or (uid and (o.get("metadata") or {}).get("uid") != uid):
                seen.append(name)
            else:
                ok = False
        return ok, seen

    def wait_fresh(self, want: dict[str, Any], deadline: float) -> list[str]:
        """Block until :meth:`fresh`; the deleted names seen.

        Raises
        ------
        ApiError
            Not fresh by ``deadline`` (``time.monotonic``): status 0, with the last watch
            error; the reflector lists again.
        """
        with self._cond:
            while True:
                ok, seen = self._fresh(want)
                if ok:
                    return seen
                left = deadline - time.monotonic()
                if left <= 0 or self._stop.is_set():
                    break
                self._cond.wait(min(left, 0.5))
        self.request_relist()
        why = self.last_error or ("not listed yet" if not self.synced else
                                  f"at resourceVersion {self.rv}, {want} not seen")
        raise ApiError(0, f"the {self.kind} cache is not fresh ({why})", "WATCH", self.path)


class Cache:
    """The controller's reflectors: Nodes, its pods, TrainingJobs, its ConfigMaps.

    Parameters
    ----------
    kube : Kube
        The controller's connection; each reflector gets its own over the same
        configuration (a watch holds a connection).
    paths : dict
        ``kind -> (path, query)`` of each collection.
    timeout_s : float
        How long a pass waits for the cache to be fresh.
    """

    def __init__(self, kube: Kube, paths: dict[str, tuple[str, dict[str, str] | None]],
                 timeout_s: float = 10.0) -> None:
        self.kube = kube
        self.timeout_s = timeout_s
        self.reflectors: dict[str, Reflector] = {}
        for kind, (path, query) in paths.items():
            self.reflectors[kind] = Reflector(kube.clone(), kind, path, query)
        self._started = False
        refl = list(self.reflectors.values())
        self._finalizer = weakref.finalize(self, _stop_all, refl)

    def start(self) -> None:
        if not self._started:
            self._started = True
            for r in self.reflectors.values():
                r.start()

    def close(self) -> None:
        """Stop the watches."""
        self._finalizer()

    def __getitem__(self, kind: str) -> Reflector:
        return self.reflectors[kind]

    def wait_fresh(self, kind: str, *wants: dict[str, Any]) -> list[str]:
        """Block until reflector ``kind`` has seen every write of ``wants`` (the union);
        the deleted names seen.  Raises ApiError when it has not within ``timeout_s``."""
        self.start()
        want: dict[str, Any] = {"rv": 0, "gone": {}}
        for w in wants:
            if not w:
                continue
            want["rv"] = max(want["rv"], int(w.get("rv", 0)))
            for n, uid in (w.get("gone") or {}).items():
                want["gone"][n] = uid
        return self.reflectors[kind].wait_fresh(want, time.monotonic() + self.timeout_s)

    def stats(self) -> dict[str, dict[str, int]]:
        """Per kind: lists, watches (connections) and events so far."""
        return {k: {"lists": r.n_lists, "watches": r.n_watches, "events": r.n_events,
                    "objects": len(r.items), "rv": r.rv}
                for k, r in self.reflectors.items()}


def _stop_all(refl: list[Reflector]) -> None:
    for r in refl:
        r.stop()
