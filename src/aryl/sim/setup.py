"""The cluster and the speed model of a replay, from its :class:`SimConfig`.

* :func:`resolve_cluster` — the pools: ``SimConfig.cluster`` (a preset or a
  TOML file, docs/cluster.md), else one training and one inference pool from
  the server counts (one GPU type, ``V100``, the reference type of the
  measured speeds);
* :func:`speed_model` — ``parametric`` (the ``alpha`` curve; every type at
  speed 1 unless ``loaned_gpu_speed``) or ``measured`` (bundled per-family
  speeds and scaling per GPU type); ``auto`` picks measured when the cluster
  has several GPU types;
* :func:`job_families` — a model family per job for measured speeds (the
  trace's ``model`` column, else seeded by GPU-hours, :func:`aryl.speeds.assign_families`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from aryl.cluster import CLUSTER_PRESETS, ClusterSpec, cluster_preset, load_cluster_spec
from aryl.errors import InvalidInputError
from aryl.scheduling.speed import SpeedModel
from aryl.sim.config import SimConfig

__all__ = ["job_families", "resolve_cluster", "speed_kind", "speed_model", "worker_server_gpus"]


def resolve_cluster(cfg: SimConfig) -> ClusterSpec:
    """The cluster of a replay (pools in server order: training pools, then inference).

    Raises
    ------
    InvalidInputError
        An unknown preset (with the closest name) or a bad TOML file (naming the
        file, pool and field).
    """
    if cfg.cluster is None:
        return ClusterSpec.from_counts(
            cfg.n_training_servers, cfg.n_inference_servers, cfg.gpus_per_server, "V100"
        )
    name = cfg.cluster.strip()
    if name in CLUSTER_PRESETS:
        return cluster_preset(name)
    path = Path(name)
    if path.suffix.lower() == ".toml" or path.exists():
        return load_cluster_spec(path)
    return cluster_preset(name)  # raises, naming the presets and the closest


def worker_server_gpus(cfg: SimConfig, spec: ClusterSpec | None = None) -> int:
    """The server size that fixes a job's GPUs per worker (docs/model.md, "Jobs").

    The largest training server's GPUs of the replay's cluster (``spec``, else
    :func:`resolve_cluster`), ``cfg.gpus_per_server`` when it has no training
    pool: a rigid job's workers are the largest divisor of its GPUs that fits
    it, an elastic job's split workers the largest of 8, 4, 2 that fits it.
    Every caller that synthesises scaling columns for a replay
    (``simulate``, ``aryl replay``/``compare``, ``aryl sweep``) uses it, so a
    cluster spec of 4-GPU servers gets 4-GPU workers, not the 8 of
    ``gpus_per_server``'s default.
    """
    if spec is None:
        spec = resolve_cluster(cfg)
    return max((p.gpus_per_server for p in spec.training_pools), default=cfg.gpus_per_server)


def speed_kind(cfg: SimConfig, spec: ClusterSpec) -> str:
    """``parametric`` or ``measured`` (``auto``: measured on several GPU types)."""
    if cfg.speed_model != "auto":
        return cfg.speed_model
    return "measured" if len(spec.gpu_types) > 1 else "parametric"


def speed_model(cfg: SimConfig, spec: ClusterSpec) -> SpeedModel:
    """The speed model of a replay on ``spec``.

    The reference GPU type (on which a trace's durations are read) is the
    measured table's (V100) for measured speeds, else the first training pool's.
    ``loaned_gpu_speed`` sets the inference pools' types to that relative speed.
    """
    measured = speed_kind(cfg, spec) == "measured"
    table = None
    if measured:
        from aryl.speeds import SpeedTable

        table = SpeedTable.bundled()
        ref = table.reference_gpu_type
    else:
        ref = spec.training_pools[0].gpu_type if spec.training_pools else "V100"
    loaned: dict[str, float] = {}
    if cfg.loaned_gpu_speed is not None:
        loaned = {p.gpu_type: cfg.loaned_gpu_speed for p in spec.inference_pools
                  if p.gpu_type != ref}
        if not loaned:
            raise InvalidInputError(
                "loaned_gpu_speed: the inference servers are of the reference GPU type "
                f"({ref}), so their speed cannot differ; use a cluster spec whose "
                "inference pool has its own GPU type (docs/cluster.md)"
            )
    if measured:
        return SpeedModel(ref, table=table, relative_speed_override=loaned)
    return SpeedModel(ref, factors=loaned)


def job_families(
    jobs: pd.DataFrame, cfg: SimConfig, spec: ClusterSpec
) -> list[str | None] | None:
    """Model family per job (in the frame's row order) for measured speeds; None otherwise."""
    if speed_kind(cfg, spec) != "measured":
        return None
    from aryl.speeds import assign_families

    return [str(x) for x in assign_families(jobs, cfg.seed).tolist()]


def describe(spec: ClusterSpec, model: SpeedModel) -> dict[str, Any]:
    """The cluster and speed model as recorded in a replay's summary."""
    return {**spec.to_dict(), "speed_model": model.to_dict()}


def check_types(spec: ClusterSpec, model: SpeedModel) -> None:
    """Every GPU type of the cluster is known to a measured table (else an error)."""
    if model.table is None:
        return
    known = set(model.table.gpu_types)
    bad = [t for t in spec.gpu_types if t not in known]
    if bad:
        raise InvalidInputError(
            f"cluster: GPU type(s) {bad} have no measured speeds; known: {sorted(known)} "
            "(use speed_model='parametric', or loaned_gpu_speed for an inference type)"
        )
