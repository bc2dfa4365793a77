"""JSON Schemas (draft 2020-12) of the state and plan documents (``aryl schema state|plan``).

They describe :mod:`aryl.scheduling.jsonio`'s documents for clients in other
languages; :func:`aryl.scheduling.jsonio.state_from_json` checks more than the
schema can say (ids that exist, placements that fit, workers in range) and
names the item and field of any error.
"""

from __future__ import annotations

from typing import Any

from aryl._limits import MAX_DURATION_S, MAX_REMAINING_S
from aryl.scheduling.jsonio import MAX_MEMO
from aryl.scheduling.plan import Reason
from aryl.scheduling.state import (
    MAX_SEED,
    MAX_SERVER_GPUS,
    MAX_WORKERS,
    RECLAIM_POLICIES,
    SERVER_STATUS_NAMES,
)

__all__ = ["plan_schema", "state_schema"]

_NUM = {"type": "number"}
_NUM_OR_NULL = {"type": ["number", "null"]}
_NONNEG_INT = {"type": "integer", "minimum": 0}
_ID = {"type": "string", "minLength": 1}
# sizes: the reader's limits (where they enter the compiled pass, int64 there)
_WORKERS = {"type": "integer", "minimum": 1, "maximum": MAX_WORKERS}
_GPUS = {"type": "integer", "minimum": 1, "maximum": MAX_SERVER_GPUS}
_MEMO = {
    "type": "object",
    "description": "The elastic phase's capacity memo; -1 each: none.",
    "required": ["free_gpus", "loaned_servers"],
    "additionalProperties": False,
    "properties": {"free_gpus": {"type": "integer", "minimum": -1, "maximum": MAX_MEMO},
                   "loaned_servers": {"type": "integer", "minimum": -1, "maximum": MAX_MEMO}},
}
_POS_NUM = {"type": "number", "exclusiveMinimum": 0}
_DURATION = {"type": "number", "minimum": 0, "maximum": MAX_DURATION_S}
_REMAINING = {"type": "number", "minimum": 0, "maximum": MAX_REMAINING_S}
_SPEED_TABLE = {
    "description": "A speed table's whole content (aryl.speeds.SpeedTable.to_dict).",
    "oneOf": [
        {"type": "object",
         "required": ["kind", "pairs"],
         "additionalProperties": False,
         "properties": {
             "kind": {"const": "measured"},
             "reference": _ID,
             "extrapolation": {"enum": ["doubling", "flat"]},
             "source": _ID,
             "pairs": {"type": "array", "minItems": 1, "items": {
                 "type": "object",
                 "required": ["family", "gpu_type", "relative_speed", "replicas", "scaling"],
                 "additionalProperties": False,
                 "properties": {
                     "family": _ID, "gpu_type": _ID, "relative_speed": _POS_NUM,
                     "replicas": {"type": "array", "minItems": 1,
                                  "items": {"type": "integer", "minimum": 1}},
                     "scaling": {"type": "array", "minItems": 1,
                                 "items": {"type": "number", "minimum": 1}},
                 }}},
         }},
        {"type": "object",
         "required": ["kind", "alpha"],
         "additionalProperties": False,
         "properties": {
             "kind": {"const": "parametric"},
             "reference": _ID,
             "alpha": {"type": "number", "minimum": 0, "maximum": 1},
             "factors": {"type": "object", "additionalProperties": _POS_NUM},
         }},
    ],
}

_PLACEMENT = {
    "type": "array",
    "description": "Workers of one job per server.",
    "items": {
        "type": "object",
        "required": ["server", "workers"],
        "additionalProperties": False,
        "properties": {"server": _ID, "workers": _WORKERS},
    },
}


def state_schema() -> dict[str, Any]:
    """The JSON Schema of a cluster-state document."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:aryl:schema:state:1",
        "title": "aryl cluster state",
        "description": (
            "Everything one aryl scheduling pass reads. Times in seconds on the client's "
            "clock; work in seconds at the job's reference size (ref_workers workers)."
        ),
        "type": "object",
        "required": ["now_s", "servers"],
        "additionalProperties": False,
        "properties": {
            "schema_version": {"const": 1},
            "now_s": _NUM,
            "config": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "rescale_pause_s": _DURATION,
                    "checkpoint_interval_s": {"type": "number", "exclusiveMinimum": 0,
                                              "maximum": MAX_DURATION_S},
                    "restart_cost_s": _DURATION,
                    "loan_reserve_servers": {"type": "integer", "minimum": 0,
                                             "maximum": MAX_WORKERS},
                    "loan_cooldown_s": _DURATION,
                    "starvation_bound_s": {"type": ["number", "null"], "minimum": 0,
                                           "maximum": MAX_DURATION_S,
                                           "description": "null: no bound."},
                    "reclaim_policy": {"enum": list(RECLAIM_POLICIES)},
                    "seed": {"type": "integer", "minimum": 0, "maximum": MAX_SEED},
                    "backend": {"enum": ["native", "reference"]},
                    "mix_gpu_types": {"type": "boolean"},
                },
            },
            "speed_model": {
                "type": ["object", "null"],
                "description": "Speeds per GPU type; null: every type equally fast.",
                "additionalProperties": False,
                "properties": {
                    "reference_gpu_type": _ID,
                    "factors": {"type": "object", "additionalProperties": _POS_NUM},
                    "table": {"anyOf": [{"enum": ["bundled", None]}, _SPEED_TABLE]},
                    "relative_speed_override": {
                        "type": "object", "additionalProperties": _POS_NUM},
                },
            },
            "servers": {
                "type": "array",
                "minItems": 1,
                "description": "Training servers first, then inference servers.",
                "items": {
                    "type": "object",
                    "required": ["id", "role", "gpus"],
                    "additionalProperties": False,
                    "properties": {
                        "id": _ID,
                        "role": {"enum": ["training", "inference"]},
                        "gpus": _GPUS,
                        "pool": _ID,
                        "gpu_type": _ID,
                        "status": {"enum": list(SERVER_STATUS_NAMES)},
                        "reclaimed_s": _NUM_OR_NULL,
                    },
                },
            },
            "inference": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "servers_needed": {
                        **_NONNEG_INT,
                        "description": "At most the number of inference servers.",
                    },
                    "reclaim_deadline_s": {
                        **_NUM_OR_NULL,
                        "description": "The older form of a request: once it has come, every "
                                       "missing inference server is due; null: nothing asked "
                                       "this way.",
                    },
                    "reclaim_requests": {
                        "type": "array",
                        "description": "Pending requests for servers back, each rise of the "
                                       "inference demand with its own deadline; returned "
                                       "servers serve the earliest deadline first.",
                        "items": {
                            "type": "object",
                            "required": ["deadline_s", "servers"],
                            "additionalProperties": False,
                            "properties": {
                                "deadline_s": _NUM,
                                "servers": {"type": "integer", "minimum": 1,
                                            "maximum": MAX_WORKERS},
                            },
                        },
                    },
                },
            },
            "jobs": {
                "type": "array",
                "description": "Active jobs (queued and running) in arrival order (a job "
                               "out of order is refused, naming the pair); the position "
                               "breaks ties between equal arrival times.  No time of a job "
                               "(arrival_s, queued_since_s, attained_at_s) is after now_s.",
                "items": {
                    "type": "object",
                    "required": ["id", "arrival_s", "gpus_per_worker", "ref_workers",
                                 "status", "remaining_s"],
                    "additionalProperties": False,
                    "properties": {
                        "id": _ID,
                        "arrival_s": _NUM,
                        "gpus_per_worker": _GPUS,
                        "ref_workers": _WORKERS,
                        "min_workers": _WORKERS,
                        "max_workers": _WORKERS,
                        "elastic": {"type": "boolean"},
                        "alpha": {"type": "number", "minimum": 0, "maximum": 1},
                        "family": {"type": ["string", "null"],
                                   "description": "Model family of measured speeds."},
                        "status": {"enum": ["queued", "running"]},
                        "remaining_s": _REMAINING,
                        "progress_at_s": _NUM,
                        "checkpoint_remaining_s": _REMAINING,
                        "next_checkpoint_s": _NUM_OR_NULL,
                        "restarted": {"type": "boolean"},
                        "queued_since_s": _NUM,
                        "waited_s": {
                            "type": "number", "minimum": 0,
                            "description": "Seconds queued before the current wait (queue "
                                           "age = waited_s + now - queued_since_s).",
                        },
                        "attained_gpu_s": {"type": "number", "minimum": 0},
                        "attained_at_s": _NUM,
                        "placement": _PLACEMENT,
                    },
                },
            },
            "running": {
                "type": "array",
                "items": _ID,
                "description": "Ids of the running jobs in the order they started.",
            },
            "elastic_memo": _MEMO,
        },
    }


def plan_schema() -> dict[str, Any]:
    """The JSON Schema of a plan document."""
    reasons = [r.label for r in Reason]
    job_action = {
        "type": "object",
        "required": ["job", "reason"],
        "additionalProperties": False,
        "properties": {"job": _ID, "reason": {"enum": reasons}, "placement": _PLACEMENT},
    }
    server_action = {
        "type": "object",
        "required": ["server", "reason"],
        "additionalProperties": False,
        "properties": {"server": _ID, "reason": {"enum": reasons}},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:aryl:schema:plan:1",
        "title": "aryl schedule plan",
        "description": (
            "The decisions of one pass, applied in this order: reclaim.actions, "
            "reclaim.servers returned, borrow, preempt, resize (all removals, then the "
            "new placements), start, return."
        ),
        "type": "object",
        "required": ["now_s", "reclaim", "borrow", "preempt", "resize", "start", "return"],
        "additionalProperties": False,
        "properties": {
            "schema_version": {"const": 1},
            "now_s": _NUM,
            "reclaim": {
                "type": "object",
                "required": ["actions", "servers", "shortfall"],
                "additionalProperties": False,
                "properties": {
                    "actions": {"type": "array", "items": job_action},
                    "servers": {"type": "array", "items": _ID},
                    "shortfall": _NONNEG_INT,
                },
            },
            "borrow": {"type": "array", "items": server_action},
            "preempt": {"type": "array", "items": job_action},
            "resize": {"type": "array", "items": job_action},
            "start": {"type": "array", "items": job_action},
            "return": {"type": "array", "items": server_action},
            "elastic_memo": _MEMO,
            "next_wakeup_s": {
                **_NUM_OR_NULL,
                "description": "When a timed rule (a reclaim deadline, the end of the loan "
                               "cool-down, a policy's own) could change a decision if "
                               "nothing else happens: call the pass again by then; null: "
                               "no timed rule pending.",
            },
        },
    }
