"""``aryl k8s``: the Kubernetes controller and the commands of the tutorial (docs/kubernetes.md).

* ``aryl k8s run --kubeconfig FILE [--namespace NS] [--once]``: the controller;
* ``aryl k8s apply FILE.yaml [--dry-run]``: create or replace the objects of a manifest
  (CRD, RBAC, Deployment, TrainingJobs; a small ``kubectl apply``);
* ``aryl k8s demand N``: the inference autoscaler's side (ConfigMap ``aryl-inference``);
* ``aryl k8s get``: the jobs (phase, workers, placement, reasons) and recent Events;
* ``aryl k8s testenv``: a local etcd + kube-apiserver with fake GPU nodes and a fake kubelet.

The ``kubernetes`` client is optional (``pip install 'aryl[k8s]'``); without it these
commands say so and exit with status 2.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from pathlib import Path
from typing import Any

import click

from aryl.errors import ArylError, InvalidInputError

__all__ = ["k8s_command"]

log = logging.getLogger(__name__)

_KUBECONFIG = click.option(
    "--kubeconfig", type=click.Path(dir_okay=False, exists=True), default=None,
    help="Kubeconfig file (default: the in-cluster service account).")
_NAMESPACE = click.option("--namespace", "-n", default="default", show_default=True,
                          help="Namespace of the TrainingJobs, pods, Events and ConfigMaps.")


def _kube(kubeconfig: str | None, namespace: str) -> Any:
    try:
        from aryl.k8s.kube import Kube, load_api_client

        return Kube(load_api_client(kubeconfig), namespace)
    except ArylError as exc:
        raise click.UsageError(str(exc)) from None
    except Exception as exc:  # the client's own configuration errors
        raise click.UsageError(f"--kubeconfig: {exc}") from None


def _api_errors(fn: Any) -> Any:
    """Turn the controller's errors into a message and exit status 1 (2 for bad input)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InvalidInputError as exc:
            raise click.UsageError(str(exc)) from None
        except ArylError as exc:
            raise click.ClickException(str(exc)) from None

    return wrapper


@click.group("k8s")
def k8s_command() -> None:
    """Schedule TrainingJobs on a Kubernetes cluster with Aryl (docs/kubernetes.md)."""


@k8s_command.command("run")
@_KUBECONFIG
@_NAMESPACE
@click.option("--once", is_flag=True, help="One pass (finish the last decision, make the next "
                                           "when due), then exit.")
@click.option("--policy", default="aryl", show_default=True, help="Scheduling policy.")
@click.option("--virtual-clock", is_flag=True,
              help="Read 'now' from the ConfigMap aryl-clock (data.nowS) and decide once per "
                   "value written there (the test harness).")
@click.option("--poll-s", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              help="Seconds between passes.")
@click.option("--resync-s", type=click.FloatRange(min=1.0), default=60.0, show_default=True,
              help="Decide at least this often (wall clock) even if nothing changed.")
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True,
              help="Elect one leader through the Lease aryl-controller; only it writes.")
@click.option("--lease-duration-s", type=click.FloatRange(min=1.0), default=15.0,
              show_default=True, help="A leader silent this long is replaced.")
@click.option("--identity", default=None, help="Holder identity in the Lease "
                                               "(default the host name).")
@click.option("--watch/--no-watch", default=True, show_default=True,
              help="Keep a cache (list once, then watch) rather than list everything every "
                   "pass (--once always lists).")
@_api_errors
def run_command(kubeconfig: str | None, namespace: str, once: bool, policy: str,
                virtual_clock: bool, poll_s: float, resync_s: float, leader_elect: bool,
                lease_duration_s: float, identity: str | None, watch: bool) -> None:
    """Run the controller: read the cluster, decide with aryl.schedule, apply the plan."""
    from aryl.k8s.controller import Controller, ControllerOptions
    from aryl.scheduling.registry import available_policies

    if policy not in available_policies():
        raise click.BadParameter(f"unknown policy {policy!r}; choose from {available_policies()}",
                                 param_hint="--policy")
    opts = ControllerOptions(namespace=namespace, virtual_clock=virtual_clock, policy=policy,
                             poll_s=poll_s, resync_s=resync_s, leader_election=leader_elect,
                             lease_duration_s=lease_duration_s, watch=watch and not once)
    if identity:
        opts.identity = identity
    ctl = Controller(_kube(kubeconfig, namespace), opts)
    if once:
        if leader_elect and not ctl.try_lead():
            click.echo("another controller holds the lease: nothing done")
            return
        r = ctl.run_once()
        click.echo(f"pass {r.pass_no}: {r.n_actions} actions" if r.decided
                   else "nothing due")
        return
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        n = ctl.run(stop)
    finally:
        ctl.close()
    click.echo(f"stopped after {n} decisions")


@k8s_command.command("apply")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
@_KUBECONFIG
@_NAMESPACE
@click.option("--dry-run", is_flag=True, help="Server-side dry run: validated, not stored.")
@_api_errors
def apply_command(files: tuple[str, ...], kubeconfig: str | None, namespace: str,
                  dry_run: bool) -> None:
    """Create or replace the objects of YAML FILES (CRD, RBAC, Deployment, TrainingJobs)."""
    from aryl.k8s.manifests import apply_file

    k = _kube(kubeconfig, namespace)
    for f in files:
        for name in apply_file(k, f, dry_run=dry_run):
            click.echo(f"{name} {'accepted (dry run)' if dry_run else 'applied'}")


@k8s_command.command("demand")
@click.argument("servers_needed", type=click.IntRange(min=0))
@_KUBECONFIG
@_NAMESPACE
@_api_errors
def demand_command(servers_needed: int, kubeconfig: str | None, namespace: str) -> None:
    """Say how many inference servers the inference side needs now (ConfigMap aryl-inference)."""
    from aryl.k8s.testenv import set_config_map

    set_config_map(_kube(kubeconfig, namespace), "aryl-inference",
                   {"serversNeeded": str(servers_needed)})
    click.echo(f"aryl-inference: serversNeeded={servers_needed}")


@k8s_command.command("get")
@_KUBECONFIG
@_NAMESPACE
@click.option("--events", "n_events", type=click.IntRange(min=0), default=15, show_default=True,
              help="How many of the latest Events to show.")
@_api_errors
def get_command(kubeconfig: str | None, namespace: str, n_events: int) -> None:
    """List the TrainingJobs (phase, workers, placement, reasons) and the latest Events."""
    from rich.console import Console
    from rich.table import Table

    k = _kube(kubeconfig, namespace)
    jobs = k.request("GET", k.ns_path("trainingjobs", group="aryl.io/v1alpha1"))["items"]
    t = Table("job", "phase", "workers", "placement", "reasons", "message")
    for j in jobs:
        s = j.get("status") or {}
        place = ", ".join(f"{p['node']} x{p['workers']}" for p in s.get("placement") or [])
        t.add_row(j["metadata"]["name"], str(s.get("phase", "")), str(s.get("workers", "")),
                  place, ",".join(s.get("reasons") or []), str(s.get("message", "")))
    con = Console()
    con.print(t)
    nodes = k.request("GET", "/api/v1/nodes")["items"]
    tn = Table("node", "pool", "loaned", "tainted", "cordoned")
    for n in nodes:
        lab = n["metadata"].get("labels") or {}
        spec = n.get("spec") or {}
        tn.add_row(n["metadata"]["name"], lab.get("aryl.io/pool", ""),
                   lab.get("aryl.io/loaned", ""),
                   "yes" if any(x.get("key") == "aryl.io/inference"
                                for x in spec.get("taints") or []) else "",
                   "yes" if spec.get("unschedulable") else "")
    con.print(tn)
    if n_events:
        evs = k.request("GET", k.ns_path("events"))["items"]
        evs.sort(key=lambda e: (e.get("lastTimestamp") or "", e["metadata"]["name"]))
        te = Table("object", "reason", "message")
        for e in evs[-n_events:]:
            io = e["involvedObject"]
            te.add_row(f"{io['kind']}/{io['name']}", e.get("reason", ""), e.get("message", ""))
        con.print(te)


@k8s_command.command("testenv")
@click.option("--dir", "workdir", type=click.Path(file_okay=False), default="aryl-testenv",
              show_default=True, help="Work directory (etcd data, certificates, kubeconfigs).")
@click.option("--training-nodes", type=click.IntRange(min=0), default=4, show_default=True)
@click.option("--inference-nodes", type=click.IntRange(min=0), default=2, show_default=True)
@click.option("--gpus", type=click.IntRange(min=1), default=8, show_default=True,
              help="GPUs per fake node.")
@_NAMESPACE
@_api_errors
def testenv_command(workdir: str, training_nodes: int, inference_nodes: int, gpus: int,
                    namespace: str) -> None:
    """Start etcd + kube-apiserver (built by scripts/k8s-testenv.sh) with fake GPU nodes, and
    play the kubelet (bound pods run; evicted pods go) until Ctrl-C."""
    from aryl.k8s.kube import ApiError, Kube, load_api_client
    from aryl.k8s.testenv import TestEnv, add_fake_nodes, kubelet_step

    env = TestEnv(Path(workdir).resolve())
    env.start()
    try:
        admin = Kube(load_api_client(str(env.admin_kubeconfig)), namespace)
        add_fake_nodes(admin, training_nodes, inference_nodes, gpus=gpus)
        click.echo(f"API server {env.server}\n"
                   f"admin kubeconfig:      {env.admin_kubeconfig}\n"
                   f"controller kubeconfig: {env.controller_kubeconfig} "
                   "(rights from deploy/rbac.yaml only)\n"
                   f"{training_nodes} training + {inference_nodes} inference nodes of {gpus} "
                   "GPUs; playing the kubelet in namespace "
                   f"{namespace!r} (Ctrl-C stops everything)")
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        while not stop.is_set():
            try:
                kubelet_step(admin)
            except ApiError as exc:
                log.warning("kubelet: %s", exc)
            stop.wait(1.0)
    finally:
        env.stop()
        time.sleep(0.1)
