"""The JSON documents of the scheduling pass (``aryl.scheduling.jsonio``, ``.schema``).

* every refusal of :func:`state_from_json` and :func:`plan_from_json`, with its
  whole message (the item, the field and what is wrong);
* the documented defaults of the optional fields, read back from the state;
* :func:`state_to_json` / :func:`plan_to_json` of hand-built states and plans,
  compared with documents written out by hand;
* the published JSON Schemas agree with the reader: documents at the edges of
  every range are valid for both, and one step past an edge is refused by both
  (``jsonschema`` is the independent judge of the schema).
"""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aryl.errors import InvalidInputError
from aryl.scheduling import ClusterState, Reason, SchedulePlan, SchedulerConfig, schedule
from aryl.scheduling.jsonio import (
    plan_from_json,
    plan_to_json,
    read_state,
    state_from_json,
    state_to_json,
)
from aryl.scheduling.schema import plan_schema, state_schema
from aryl.scheduling.speed import SpeedModel
from aryl.scheduling.state import IDLE, LOANED, QUEUED, RUNNING, SERVING

jsonschema = pytest.importorskip("jsonschema")


def base_doc() -> dict[str, Any]:
    """t0: training, 8 GPUs; i0: idle inference; i1: loaned inference (8 GPUs each).

    Q: queued rigid job (2 workers of 1 GPU); R: running elastic job (2 GPUs per
    worker, 1..3 workers) with 2 workers on t0 and 1 on the loaned i1.
    """
    return {
        "schema_version": 1,
        "now_s": 100.0,
        "config": {"loan_reserve_servers": 0},
        "servers": [
            {"id": "t0", "role": "training", "gpus": 8},
            {"id": "i0", "role": "inference", "gpus": 8, "status": "idle"},
            {"id": "i1", "role": "inference", "gpus": 8, "status": "loaned"},
        ],
        "inference": {"servers_needed": 0, "reclaim_deadline_s": None},
        "jobs": [
            {"id": "Q", "arrival_s": 10.0, "gpus_per_worker": 1, "ref_workers": 2,
             "status": "queued", "remaining_s": 50.0},
            {"id": "R", "arrival_s": 20.0, "gpus_per_worker": 2, "ref_workers": 2,
             "min_workers": 1, "max_workers": 3, "elastic": True, "status": "running",
             "remaining_s": 500.0,
             "placement": [{"server": "t0", "workers": 2}, {"server": "i1", "workers": 1}]},
        ],
    }


def refused(doc: Any) -> str:
    with pytest.raises(InvalidInputError) as info:
        state_from_json(doc)
    return str(info.value)


# ------------------------------------------------------------------ refusals

def _set(path: list[Any], value: Any) -> Any:
    def edit(d: dict[str, Any]) -> None:
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value
    return edit


def _drop(path: list[Any]) -> Any:
    def edit(d: dict[str, Any]) -> None:
        for k in path[:-1]:
            d = d[k]
        del d[path[-1]]
    return edit


_REFUSALS = [
    (_set(["schema_version"], 2), "state.schema_version: this aryl reads version 1, got 2"),
    (_drop(["now_s"]), "state.now_s: required field missing"),
    (_set(["now_s"], "soon"), "state.now_s: must be a finite number, got 'soon'"),
    (_set(["now_s"], math.inf), "state.now_s: must be a finite number, got inf"),
    (_set(["now_s"], True), "state.now_s: must be a finite number, got True"),
    (_set(["now_s"], None), "state.now_s: must be a finite number, got None"),
    (_set(["config"], [1]), "state.config: must be an object"),
    # beyond the shared bounds: 1e308 s made every JCT reduction inf (no extras, silently)
    (_set(["jobs", 1, "remaining_s"], 1e308),
     "jobs[1] ('R').remaining_s: must be a number in [0, 1e+12], got 1e+308"),
    (_set(["jobs", 1, "checkpoint_remaining_s"], 2e12),
     "jobs[1] ('R').checkpoint_remaining_s: must be at most 1e+12 s, got 2000000000000.0"),
    (_set(["config", "rescale_pause_s"], 1e308),
     "state.config.rescale_pause_s: must be a number in [0, 1e+09], got 1e+308"),
    (_set(["config"], {"seed": 0, "sede": 1}),
     "state.config: unknown field(s) 'sede' (did you mean 'seed'?)"),
    (_set(["config"], {"zzz": 1}), "state.config: unknown field(s) 'zzz'"),
    (_set(["servers"], []), "state.servers: must be a non-empty list"),
    (_set(["servers"], {"id": "t0"}), "state.servers: must be a non-empty list"),
    (_set(["servers", 1], "i0"), "servers[1]: must be an object"),
    (_drop(["servers", 1, "id"]), "servers[1].id: required field missing"),
    (_set(["servers", 1, "id"], ""), "servers[1].id: must be a non-empty string, got ''"),
    (_set(["servers", 1, "id"], 7), "servers[1].id: must be a non-empty string, got 7"),
    (_set(["servers", 1, "id"], "t0"), "servers[1] ('t0').id: duplicate server id"),
    (_drop(["servers", 1, "role"]), "servers[1] ('i0').role: required field missing"),
    (_set(["servers", 1, "status"], "busy"),
     "servers[1] ('i0').status: must be one of ['training', 'serving', 'idle', 'loaned'], "
     "got 'busy'"),
    (_set(["servers", 1, "gpus"], 8.0), "servers[1] ('i0').gpus: must be an integer, got 8.0"),
    (_set(["servers", 1, "gpus"], True), "servers[1] ('i0').gpus: must be an integer, got True"),
    (_drop(["servers", 1, "gpus"]), "servers[1] ('i0').gpus: required field missing"),
    (_set(["servers", 1, "reclaimed_s"], "x"),
     "servers[1] ('i0').reclaimed_s: must be a finite number, got 'x'"),
    (_set(["servers", 1, "colour"], "red"), "servers[1]: unknown field(s) 'colour'"),
    (_set(["inference"], 3), "state.inference: must be an object"),
    (_set(["inference"], {"servers_neded": 1}),
     "state.inference: unknown field(s) 'servers_neded' (did you mean 'servers_needed'?)"),
    (_set(["inference", "servers_needed"], -1), "state.inference.servers_needed: must be >= 0"),
    (_set(["inference", "servers_needed"], 1.5),
     "state.inference.servers_needed: must be an integer, got 1.5"),
    (_set(["inference", "reclaim_deadline_s"], math.nan),
     "state.inference.reclaim_deadline_s: must be a finite number, got nan"),
    (_set(["jobs"], {"Q": {}}), "state.jobs: must be a list"),
    (_set(["jobs", 0], []), "jobs[0]: must be an object"),
    (_drop(["jobs", 0, "id"]), "jobs[0].id: required field missing"),
    (_set(["jobs", 0, "priority"], 1), "jobs[0]: unknown field(s) 'priority'"),
    (_set(["jobs", 1, "id"], "Q"), "jobs[1] ('Q').id: duplicate job id"),
    (_drop(["jobs", 0, "status"]), "jobs[0] ('Q').status: required field missing"),
    (_set(["jobs", 0, "status"], "pending"),
     "jobs[0] ('Q').status: must be 'queued' or 'running' (list only active jobs), "
     "got 'pending'"),
    (_drop(["jobs", 0, "ref_workers"]), "jobs[0] ('Q').ref_workers: required field missing"),
    (_set(["jobs", 0, "elastic"], 1), "jobs[0] ('Q').elastic: must be true or false, got 1"),
    (_drop(["jobs", 0, "arrival_s"]), "jobs[0] ('Q').arrival_s: required field missing"),
    (_drop(["jobs", 0, "gpus_per_worker"]),
     "jobs[0] ('Q').gpus_per_worker: required field missing"),
    (_drop(["jobs", 0, "remaining_s"]), "jobs[0] ('Q').remaining_s: required field missing"),
    (_set(["jobs", 0, "min_workers"], 1.0),
     "jobs[0] ('Q').min_workers: must be an integer, got 1.0"),
    (_set(["jobs", 0, "max_workers"], "3"),
     "jobs[0] ('Q').max_workers: must be an integer, got '3'"),
    (_set(["jobs", 0, "alpha"], "0.1"), "jobs[0] ('Q').alpha: must be a finite number, got '0.1'"),
    (_set(["jobs", 0, "checkpoint_remaining_s"], None),
     "jobs[0] ('Q').checkpoint_remaining_s: must be a finite number, got None"),
    (_set(["jobs", 0, "next_checkpoint_s"], "never"),
     "jobs[0] ('Q').next_checkpoint_s: must be a finite number, got 'never'"),
    (_set(["jobs", 0, "restarted"], "no"),
     "jobs[0] ('Q').restarted: must be true or false, got 'no'"),
    (_set(["jobs", 0, "queued_since_s"], None),
     "jobs[0] ('Q').queued_since_s: must be a finite number, got None"),
    (_set(["jobs", 0, "waited_s"], -0.5), "jobs[0] ('Q').waited_s: must be >= 0"),
    (_set(["jobs", 0, "waited_s"], None),
     "jobs[0] ('Q').waited_s: must be a finite number, got None"),
    (_set(["jobs", 0, "attained_gpu_s"], -1.0), "jobs[0] ('Q').attained_gpu_s: must be >= 0"),
    (_set(["jobs", 0, "attained_gpu_s"], None),
     "jobs[0] ('Q').attained_gpu_s: must be a finite number, got None"),
    (_set(["jobs", 0, "attained_at_s"], None),
     "jobs[0] ('Q').attained_at_s: must be a finite number, got None"),
    (_set(["jobs", 0, "progress_at_s"], None),
     "jobs[0] ('Q').progress_at_s: must be a finite number, got None"),
    (_set(["jobs", 0, "placement"], [{"server": "t0", "workers": 2}]),
     "jobs[0] ('Q').placement: a queued job has no placement"),
    (_drop(["jobs", 1, "placement"]),
     "jobs[1] ('R').placement: a running job needs a non-empty list"),
    (_set(["jobs", 1, "placement"], []),
     "jobs[1] ('R').placement: a running job needs a non-empty list"),
    (_set(["jobs", 1, "placement"], {"server": "t0", "workers": 2}),
     "jobs[1] ('R').placement: a running job needs a non-empty list"),
    (_set(["jobs", 1, "placement", 1], "i1"), "jobs[1] ('R').placement[1]: must be an object"),
    (_set(["jobs", 1, "placement", 1], {"server": "i1", "workers": 1, "gpus": 2}),
     "jobs[1] ('R').placement[1]: unknown field(s) 'gpus'"),
    (_set(["jobs", 1, "placement", 1], {"server": "i9", "workers": 1}),
     "jobs[1] ('R').placement[1].server: unknown server 'i9'"),
    (_set(["jobs", 1, "placement", 1], {"workers": 1}),
     "jobs[1] ('R').placement[1].server: required field missing"),
    (_set(["jobs", 1, "placement", 1], {"server": "i1"}),
     "jobs[1] ('R').placement[1].workers: required field missing"),
    (_set(["jobs", 1, "placement", 1], {"server": "i1", "workers": 0}),
     "jobs[1] ('R').placement[1].workers: must be >= 1"),
    (_set(["jobs", 1, "placement", 1], {"server": "t0", "workers": 1}),
     "jobs[1] ('R').placement[1].server: server 't0' listed twice"),
    # 2 + 2 = 4 workers > max_workers 3
    (_set(["jobs", 1, "placement", 1], {"server": "i1", "workers": 2}),
     "jobs[1] ('R').placement: 4 workers outside [min_workers, max_workers] = [1, 3]"),
    (_set(["running"], "R"), "state.running: must be a list of job ids"),
    (_set(["running"], ["Q"]), "state.running[0]: 'Q' is not a running job of state.jobs"),
    (_set(["running"], ["R", "R"]), "state.running[1]: 'R' listed twice"),
    (_set(["running"], []), "state.running: running job(s) missing: ['R']"),
    (_set(["elastic_memo"], [1, 2]), "state.elastic_memo: must be an object"),
    (_set(["elastic_memo"], {"free_gpus": 1}),
     "state.elastic_memo.loaned_servers: required field missing"),
    (_set(["elastic_memo"], {"free_gpus": 1.5, "loaned_servers": 0}),
     "state.elastic_memo.free_gpus: must be an integer, got 1.5"),
    (_set(["elastic_memo"], {"free_gpus": 1, "loaned_servers": 0, "x": 0}),
     "state.elastic_memo: unknown field(s) 'x'"),
    (_set(["speed_model"], "fast"), "state.speed_model: must be an object or null"),
    (_set(["speed_model"], {"table": "mine"}),
     "state.speed_model.table: must be 'bundled', a table object or null, got 'mine'"),
    (_set(["speed_model"], {"factors": [1.0]}), "state.speed_model.factors: must be an object"),
    (_set(["speed_model"], {"relative_speed_override": 2}),
     "state.speed_model.relative_speed_override: must be an object"),
    (_set(["speed_model"], {"factor": {}}),
     "state.speed_model: unknown field(s) 'factor' (did you mean 'factors'?)"),
    (_set(["unknown_key"], 1), "state: unknown field(s) 'unknown_key'"),
    # a state no cluster can be in (ClusterState.validate; before, accepted silently)
    (_set(["jobs", 0, "arrival_s"], 150.0),
     "jobs[0] ('Q').arrival_s: 150.0 is after now_s 100.0 (list only jobs that have arrived, "
     "with their past)"),
    (_set(["jobs", 1, "arrival_s"], 5.0),
     "jobs[1] ('R').arrival_s: 5.0 is before 10.0 of jobs[0] ('Q'); list the jobs in arrival "
     "order (the position breaks ties between equal times)"),
    (_set(["jobs", 0, "queued_since_s"], 100.5),
     "jobs[0] ('Q').queued_since_s: 100.5 is after now_s 100.0 (list only jobs that have "
     "arrived, with their past)"),
    (_set(["jobs", 1, "attained_at_s"], 101.0),
     "jobs[1] ('R').attained_at_s: 101.0 is after now_s 100.0 (list only jobs that have "
     "arrived, with their past)"),
    # i0 and i1 are the 2 inference servers (the plan reported shortfall 0 for 3)
    (_set(["inference", "servers_needed"], 3),
     "state.inference.servers_needed: 3 is more than the 2 inference server(s)"),
    # sizes where they enter the compiled pass (before: "Unable to cast", OverflowError,
    # std::bad_alloc)
    (_set(["config", "seed"], 2**63),
     "state.config.seed: must be an integer in [0, 9223372036854775807], got "
     "9223372036854775808"),
    (_set(["config", "loan_reserve_servers"], 2**31),
     "state.config.loan_reserve_servers: must be an integer in [0, 2147483647], got "
     "2147483648"),
    (_set(["servers", 0, "gpus"], 2**63),
     "servers[0] ('t0').gpus: must be an integer in [1, 1048576], got 9223372036854775808"),
    (_set(["jobs", 0, "max_workers"], 2**40),
     "jobs[0] ('Q').max_workers: must be an integer in [1, 2147483647], got 1099511627776"),
    (_set(["jobs", 0, "gpus_per_worker"], 2**20 + 1),
     "jobs[0] ('Q').gpus_per_worker: must be an integer in [1, 1048576], got 1048577"),
    (_set(["elastic_memo"], {"free_gpus": 2**63, "loaned_servers": 0}),
     "state.elastic_memo.free_gpus: must be an integer in [-1, 4611686018427387904], got "
     "9223372036854775808"),
    (_set(["elastic_memo"], {"free_gpus": 0, "loaned_servers": -2}),
     "state.elastic_memo.loaned_servers: must be an integer in [-1, 4611686018427387904], "
     "got -2"),
    (_set(["now_s"], 2**1024),  # an int no double holds
     "state.now_s: must be a finite number, got " + str(2**1024)),
    (_set(["jobs", 0, "remaining_s"], math.inf),
     "jobs[0] ('Q').remaining_s: must be a finite number, got inf"),
    (_set(["config", "starvation_bound_s"], "never"),
     "state.config.starvation_bound_s: must be a number in [0, 1e+09] (or inf: no bound), "
     "got 'never'"),
    (_set(["servers", 0, "pool"], ""),
     "servers[0] ('t0').pool: must be a non-empty string, got ''"),
    (_set(["servers", 1, "gpu_type"], 7),
     "servers[1] ('i0').gpu_type: must be a non-empty string, got 7"),
    (_set(["running"], [["R"]]), "state.running[0]: ['R'] is not a running job of state.jobs"),
    (_set(["speed_model"], {"table": {"kind": "measured", "pairs": []}}),
     "state.speed_model.table: empty speed table"),
    (_set(["speed_model"], {"table": {"kind": "measured", "source": "mine.csv", "pairs": [
        {"family": "f", "gpu_type": "V100", "relative_speed": 1.0, "replicas": [1, 2],
         "scaling": [1.0, 3.0]}]}}),
     "state.speed_model.table: mine.csv: family 'f', gpu_type 'V100': scaling 3.0 at "
     "replicas 2 is above linear"),
    (_set(["speed_model"], {"table": {"kind": "measured", "pairs": [
        {"family": "f", "gpu_type": "V100", "relative_speed": 1.0, "replicas": [1],
         "scaling": [1.0], "x": 1}]}}),
     "state.speed_model.table.pairs[0]: unknown field(s) ['x']"),
    (_set(["speed_model"], {"table": {"kind": "parametric", "alpha": 2.0}}),
     "state.speed_model.table: alpha: must be a number in [0, 1], got 2.0"),
    (_set(["speed_model"], {"table": {"kind": "lookup"}}),
     "state.speed_model.table.kind: must be 'measured' or 'parametric', got 'lookup'"),
    # R's 2 workers of 2 GPUs on t0 plus Q... Q is queued: put 3 more 2-GPU workers of
    # a second running job on t0: 4 + 6 = 10 GPUs of 8
    (lambda d: d["jobs"].append(
        {"id": "S", "arrival_s": 30.0, "gpus_per_worker": 2, "ref_workers": 3,
         "status": "running", "remaining_s": 5.0,
         "placement": [{"server": "t0", "workers": 3}]}),
     "jobs[2] ('S').placement: 3 worker(s) of 2 GPU(s) do not fit server 't0' "
     "(4 of 8 GPUs free)"),
    (_set(["jobs", 1, "placement", 1], {"server": "i0", "workers": 1}),
     "jobs[1] ('R').placement: server 'i0' is an inference server that is not on loan; it "
     "cannot host training workers"),
]


@pytest.mark.parametrize(("edit", "message"), _REFUSALS,
                         ids=[m[:40] for _, m in _REFUSALS])
def test_every_refusal_names_the_item_and_the_field(edit: Any, message: str) -> None:
    doc = base_doc()
    edit(doc)
    assert refused(doc) == message


def test_documents_that_are_not_objects_are_refused() -> None:
    assert refused("[1, 2]") == "state: the document must be a JSON object"
    assert refused(3) == "state: the document must be a JSON object"
    assert refused("{").startswith("state: not valid JSON (")
    with pytest.raises(InvalidInputError) as info:
        plan_from_json("[]", state_from_json(base_doc()))
    assert str(info.value) == "plan: the document must be a JSON object"
    with pytest.raises(InvalidInputError) as info:
        plan_from_json("{", state_from_json(base_doc()))
    assert str(info.value).startswith("plan: not valid JSON (")


def test_read_state_names_the_file(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    p.write_text(json.dumps(base_doc()))
    assert read_state(p).job_id == ["Q", "R"]
    doc = base_doc()
    doc["now_s"] = "later"
    p.write_text(json.dumps(doc))
    with pytest.raises(InvalidInputError) as info:
        read_state(p)
    assert str(info.value) == f"{p}: state.now_s: must be a finite number, got 'later'"
    with pytest.raises(InvalidInputError) as info:
        read_state(tmp_path / "none.json")
    assert str(info.value) == f"{tmp_path / 'none.json'}: file does not exist"
    with pytest.raises(InvalidInputError) as info:
        read_state(tmp_path)  # a folder: reading it fails with an OSError
    assert str(info.value).startswith(f"{tmp_path}: cannot read (")


# ------------------------------------------------------------------ defaults

def test_the_optional_fields_take_their_documented_defaults() -> None:
    doc = base_doc()
    del doc["schema_version"], doc["inference"], doc["config"]
    st = state_from_json(doc)
    assert st.config == SchedulerConfig()
    assert st.now_s == 100.0
    assert st.servers_needed == 0
    assert st.reclaim_deadline_s == math.inf
    # servers: pool = role, GPU type "default", reclaimed never; i1 on loan, i0 idle
    assert st.server_pool == ["training", "inference", "inference"]
    assert st.server_gpu_type == ["default"] * 3
    assert st.server_reclaimed_s == [-math.inf] * 3
    assert st.server_status == [0, IDLE, LOANED]
    q, r = st.job_index(["Q", "R"])
    # Q: rigid (min = max = ref = 2), alpha 0.05, queued since its arrival, nothing waited
    assert (st.min_workers[q], st.max_workers[q], st.ref_workers[q]) == (2, 2, 2)
    assert st.alpha[q] == 0.05
    assert st.elastic[q] is False
    assert st.status[q] == QUEUED
    assert list(st.queued) == [q]
    assert st.queued_since_s[q] == 10.0
    assert st.waited_s[q] == 0.0
    assert st.restarted[q] is False
    assert st.checkpoint_remaining_s[q] == 50.0  # = remaining_s
    assert st.next_checkpoint_s[q] == math.inf
    assert st.attained_gpu_s[q] == 0.0
    assert st.attained_at_s[q] == 100.0  # now
    assert st.progress_at_s[q] == 100.0  # now
    # R: running on t0 (2 workers) + i1 (1); 3 workers of 2 GPUs; the running order is
    # that of jobs; speed T(3)/T(2) = (3 / 1.1) / (2 / 1.05) = 1.4318...
    assert st.status[r] == RUNNING
    assert list(st.running) == [r]
    assert st.placement[r] == {0: 2, 2: 1}
    assert st.workers[r] == 3
    assert st.speed[r] == pytest.approx((3 / 1.1) / (2 / 1.05), rel=1e-15)
    # derived indexes: t0 8 - 4 = 4 free; i0 idle (0); i1 8 - 2 = 6; no memo
    assert st.free == [4, 0, 6]
    assert st.busy == 6
    assert st.busy_loaned == 2
    assert st.n_loaned == 1
    assert st.elastic_memo == (-1, -1)


def test_given_optional_fields_are_read_as_given() -> None:
    doc = base_doc()
    doc["servers"][1].update(pool="spare", gpu_type="T4", reclaimed_s=40.0)
    doc["servers"][1]["status"] = "serving"
    doc["inference"] = {"servers_needed": 2, "reclaim_deadline_s": 130.0}
    doc["jobs"][0].update(alpha=0.25, checkpoint_remaining_s=45.0, next_checkpoint_s=900.0,
                          restarted=True, queued_since_s=60.0, waited_s=12.0,
                          attained_gpu_s=33.0, attained_at_s=55.0, progress_at_s=66.0)
    doc["elastic_memo"] = {"free_gpus": 5, "loaned_servers": 1}
    st = state_from_json(doc)
    assert st.server_pool[1] == "spare"
    assert st.server_gpu_type[1] == "T4"
    assert st.server_reclaimed_s[1] == 40.0
    assert st.last_reclaim_s == 40.0
    assert st.server_status[1] == SERVING
    assert (st.servers_needed, st.reclaim_deadline_s) == (2, 130.0)
    q = 0
    assert (st.alpha[q], st.checkpoint_remaining_s[q], st.next_checkpoint_s[q]) == (
        0.25, 45.0, 900.0)
    assert (st.restarted[q], st.queued_since_s[q], st.waited_s[q]) == (True, 60.0, 12.0)
    assert (st.attained_gpu_s[q], st.attained_at_s[q], st.progress_at_s[q]) == (33.0, 55.0, 66.0)
    assert st.elastic_memo == (5, 1)
    # queue age at now = 100: 12 s waited before + (100 - 60) = 52 s
    assert st.queue_age_s(q) == 52.0


def test_the_running_order_is_taken_from_the_document() -> None:
    doc = base_doc()
    doc["jobs"].append({"id": "S", "arrival_s": 30.0, "gpus_per_worker": 1, "ref_workers": 1,
                        "status": "running", "remaining_s": 5.0,
                        "placement": [{"server": "t0", "workers": 1}]})
    st = state_from_json(doc)
    assert [st.job_id[j] for j in st.running] == ["R", "S"]
    doc["running"] = ["S", "R"]
    st = state_from_json(doc)
    assert [st.job_id[j] for j in st.running] == ["S", "R"]
    assert state_to_json(st)["running"] == ["S", "R"]


def test_a_speed_model_document_builds_the_model() -> None:
    doc = base_doc()
    doc["servers"][1]["gpu_type"] = "T4"
    doc["speed_model"] = {"reference_gpu_type": "default", "factors": {"T4": 0.5}}
    st = state_from_json(doc)
    assert st.speeds is not None
    assert st.speeds.reference_gpu_type == "default"
    assert st.speeds.factors == {"T4": 0.5}
    assert st.speeds.table is None
    # a null model, or one with every factor 1, is the homogeneous model (no speeds)
    doc["speed_model"] = None
    assert state_from_json(doc).speeds is None
    doc["speed_model"] = {}
    assert state_from_json(doc).speeds is None


def test_a_bundled_table_document_loads_the_bundled_speeds() -> None:
    doc = base_doc()
    doc["speed_model"] = {"reference_gpu_type": "V100", "table": "bundled"}
    for s in doc["servers"]:
        s["gpu_type"] = "V100"
    st = state_from_json(doc)
    assert st.speeds is not None
    assert st.speeds.table is not None
    assert st.speeds.to_dict()["table"] == "bundled"


# ------------------------------------------------------------------ writing

def test_state_to_json_writes_every_field() -> None:
    st = ClusterState(now_s=50.0, config=SchedulerConfig(seed=3))
    st.add_server("t0", role="training", gpus=4, gpu_type="A100")
    st.add_server("i0", role="inference", gpus=8, status="loaned", pool="inf", reclaimed_s=7.0)
    st.add_server("i1", role="inference", gpus=8, status="serving")
    st.servers_needed = 1
    st.reclaim_deadline_s = 60.0
    st.reclaim_requests = [(70.0, 1)]
    a = st.add_job("a", arrival_s=1.0, gpus_per_worker=2, ref_workers=2, remaining_s=30.0,
                   min_workers=1, max_workers=4, elastic=True, alpha=0.1)
    b = st.add_job("b", arrival_s=2.0, gpus_per_worker=1, ref_workers=3, remaining_s=9.0)
    st.add_job("done", arrival_s=0.5, gpus_per_worker=1, ref_workers=1, remaining_s=1.0)
    st.enqueue(a, 1.0)
    st.enqueue(b, 2.0)
    st.start(a, {0: 2, 1: 1}, 10.0)  # a: 3 workers from t = 10 (checkpoint at 10 + 1800)
    st.elastic_memo = (3, 1)
    doc = state_to_json(st)
    assert doc == {
        "schema_version": 1,
        "now_s": 50.0,
        "config": {"rescale_pause_s": 30.0, "checkpoint_interval_s": 1800.0,
                   "restart_cost_s": 60.0, "loan_reserve_servers": 1,
                   "loan_cooldown_s": 600.0, "starvation_bound_s": 14400.0,
                   "reclaim_policy": "aryl", "seed": 3, "backend": "native",
                   "mix_gpu_types": False},
        "speed_model": None,
        "servers": [
            {"id": "t0", "role": "training", "gpus": 4, "pool": "training",
             "gpu_type": "A100"},
            {"id": "i0", "role": "inference", "gpus": 8, "pool": "inf", "gpu_type": "default",
             "status": "loaned", "reclaimed_s": 7.0},
            {"id": "i1", "role": "inference", "gpus": 8, "pool": "inference",
             "gpu_type": "default", "status": "serving", "reclaimed_s": None},
        ],
        "inference": {"servers_needed": 1, "reclaim_deadline_s": 60.0,
                      "reclaim_requests": [{"deadline_s": 70.0, "servers": 1}]},
        "jobs": [
            {"id": "a", "arrival_s": 1.0, "gpus_per_worker": 2, "ref_workers": 2,
             "min_workers": 1, "max_workers": 4, "elastic": True, "alpha": 0.1,
             "family": None, "status": "running", "remaining_s": 30.0,
             "progress_at_s": 10.0, "checkpoint_remaining_s": 30.0,
             "next_checkpoint_s": 1810.0, "restarted": False, "queued_since_s": 1.0,
             "waited_s": 9.0, "attained_gpu_s": 0.0, "attained_at_s": 10.0,
             "placement": [{"server": "t0", "workers": 2}, {"server": "i0", "workers": 1}]},
            {"id": "b", "arrival_s": 2.0, "gpus_per_worker": 1, "ref_workers": 3,
             "min_workers": 3, "max_workers": 3, "elastic": False, "alpha": 0.05,
             "family": None, "status": "queued", "remaining_s": 9.0,
             "progress_at_s": 0.0, "checkpoint_remaining_s": 9.0,
             "next_checkpoint_s": None, "restarted": False, "queued_since_s": 2.0,
             "waited_s": 0.0, "attained_gpu_s": 0.0, "attained_at_s": 0.0},
        ],
        "running": ["a"],
        "elastic_memo": {"free_gpus": 3, "loaned_servers": 1},
    }
    # and it reads back into the same document
    assert state_to_json(state_from_json(json.dumps(doc))) == doc
    # a speed model is written as its description
    st2 = ClusterState(speeds=SpeedModel("A100", factors={"T4": 0.5}))
    st2.add_server("t0", role="training", gpus=4)
    assert state_to_json(st2)["speed_model"] == {
        "reference_gpu_type": "A100", "factors": {"T4": 0.5}, "table": None,
        "relative_speed_override": {}}


def _three_server_state() -> ClusterState:
    return state_from_json(base_doc())


def test_plan_to_json_and_back() -> None:
    st = _three_server_state()
    q, r = st.job_index(["Q", "R"])
    plan = SchedulePlan(
        now_s=100.0,
        reclaim_actions=[(r, {0: 2}, Reason.RECLAIM_SCALE_IN), (q, None, Reason.RECLAIM_PREEMPT)],
        reclaimed_servers=[2],
        reclaim_shortfall=1,
        borrowed_servers=[(1, Reason.LOAN_FOR_EXTRA)],
        preemptions=[(r, Reason.LAS_PREEMPT)],
        resizes=[(r, {0: 1, 1: 2}, Reason.MCKP_MOVE)],
        starts=[(q, {1: 2}, Reason.BACKFILL)],
        returned_servers=[(2, Reason.IDLE_LOAN)],
        elastic_memo=(6, 2),
        next_wakeup_s=700.0,
    )
    doc = plan_to_json(plan, st)
    assert doc == {
        "schema_version": 1,
        "now_s": 100.0,
        "reclaim": {
            "actions": [
                {"job": "R", "reason": "reclaim_scale_in",
                 "placement": [{"server": "t0", "workers": 2}]},
                {"job": "Q", "reason": "reclaim_preempt"},
            ],
            "servers": ["i1"],
            "shortfall": 1,
        },
        "borrow": [{"server": "i0", "reason": "loan_for_extra"}],
        "preempt": [{"job": "R", "reason": "las_preempt"}],
        "resize": [{"job": "R", "reason": "mckp_move",
                    "placement": [{"server": "t0", "workers": 1},
                                  {"server": "i0", "workers": 2}]}],
        "start": [{"job": "Q", "reason": "backfill",
                   "placement": [{"server": "i0", "workers": 2}]}],
        "return": [{"server": "i1", "reason": "idle_loan"}],
        "elastic_memo": {"free_gpus": 6, "loaned_servers": 2},
        "next_wakeup_s": 700.0,
    }
    jsonschema.validate(doc, plan_schema())
    back = plan_from_json(json.dumps(doc), st)
    assert back == plan


def test_plan_from_json_requires_every_field_of_the_schema() -> None:
    # Before, {} read as an empty plan at the state's time and a placement entry
    # without "workers" as 0 workers: the reader now wants what the schema requires.
    st = _three_server_state()
    for doc, message in (
        ({}, "plan.now_s: required field missing"),
        ({"now_s": 100.0}, "plan.reclaim: must be an object"),
        ({"now_s": 100.0, "reclaim": {"actions": [], "servers": []}},
         "plan.reclaim.shortfall: required field missing"),
        (_complete_plan({"start": [{"job": "Q", "reason": "sjf_order",
                                    "placement": [{"server": "t0"}]}]}),
         "plan.start[0].placement[0].workers: required field missing"),
        (_complete_plan({"borrow": None}), "plan.borrow: must be a list, got None"),
    ):
        with pytest.raises(InvalidInputError) as info:
            plan_from_json(doc, st)
        assert str(info.value) == message
    assert jsonschema.Draft202012Validator(plan_schema()).is_valid(_complete_plan({}))
    plan = plan_from_json(_complete_plan({}), st)
    assert plan == SchedulePlan(now_s=100.0)
    assert plan.elastic_memo == (-1, -1)
    assert not plan


_PLAN_REFUSALS = [
    ({"reclaim": {"actions": [{"job": "Z", "reason": "reclaim_preempt"}]}},
     "plan.reclaim.actions[0].job: unknown job 'Z'"),
    ({"reclaim": {"actions": [{"job": "R", "reason": "because"}]}},
     "plan.reclaim.actions[0].reason: unknown reason 'because'"),
    ({"reclaim": {"actions": [{"job": "R", "reason": "reclaim_scale_in",
                               "placement": [{"server": "x", "workers": 1}]}]}},
     "plan.reclaim.actions[0].placement[0].server: unknown server 'x'"),
    ({"reclaim": {"servers": ["i1", "i7"]}}, "plan.reclaim.servers[1]: unknown server 'i7'"),
    ({"borrow": [{"server": "i0", "reason": "loan_for_base"}, {"server": "t9"}]},
     "plan.borrow[1].server: unknown server 't9'"),
    ({"borrow": [{"server": "i0", "reason": "lent"}]},
     "plan.borrow[0].reason: unknown reason 'lent'"),
    ({"return": [{"server": "zz", "reason": "idle_loan"}]},
     "plan.return[0].server: unknown server 'zz'"),
    ({"return": [{"server": "i1", "reason": "IDLE_LOAN"}]},
     "plan.return[0].reason: unknown reason 'IDLE_LOAN'"),
    ({"preempt": [{"job": "R", "reason": "las_preempt"}, {"job": "Y", "reason": "x"}]},
     "plan.preempt[1].job: unknown job 'Y'"),
    ({"preempt": [{"job": "R", "reason": "x"}]}, "plan.preempt[0].reason: unknown reason 'x'"),
    ({"resize": [{"job": "R", "reason": "mckp_move", "placement": {"t0": 1}}]},
     "plan.resize[0].placement: must be a list"),
    ({"resize": [{"job": "W", "reason": "mckp_move", "placement": []}]},
     "plan.resize[0].job: unknown job 'W'"),
    ({"start": [{"job": "Q", "reason": "sjf_order",
                 "placement": [{"server": "t0", "workers": 1}, {"server": "q", "workers": 1}]}]},
     "plan.start[0].placement[1].server: unknown server 'q'"),
    ({"start": [{"job": "Q", "reason": "fifo", "placement": []}]},
     "plan.start[0].reason: unknown reason 'fifo'"),
    ({"start": [{"job": "Q", "reason": "sjf_order"}]},
     "plan.start[0].placement: required field missing"),
    # before: the second entry silently replaced the first (a dict by server)
    ({"start": [{"job": "Q", "reason": "sjf_order",
                 "placement": [{"server": "t0", "workers": 1}, {"server": "t0", "workers": 1}]}]},
     "plan.start[0].placement[1].server: server 't0' listed twice"),
    ({"start": [{"job": "Q", "reason": "sjf_order",
                 "placement": [{"server": "t0", "workers": 1.5}]}]},
     "plan.start[0].placement[0].workers: must be an integer, got 1.5"),
    ({"reclaim": {"shortfall": -1}},
     "plan.reclaim.shortfall: must be an integer in [0, 3], got -1"),
    ({"elastic_memo": {"free_gpus": 2**63, "loaned_servers": 0}},
     "plan.elastic_memo.free_gpus: must be an integer in [-1, 4611686018427387904], got "
     "9223372036854775808"),
    ({"now_s": "soon"}, "plan.now_s: must be a finite number, got 'soon'"),
    ({"schema_version": 2}, "plan.schema_version: this aryl reads version 1, got 2"),
    ({"extra": []}, "plan: unknown field(s) 'extra'"),
]


def _complete_plan(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc``'s fields over an empty plan at 100 s (every required field present)."""
    full: dict[str, Any] = {"now_s": 100.0,
                            "reclaim": {"actions": [], "servers": [], "shortfall": 0},
                            "borrow": [], "preempt": [], "resize": [], "start": [], "return": []}
    for key, value in doc.items():
        if key == "reclaim":
            full["reclaim"].update(value)
        else:
            full[key] = value
    return full


@pytest.mark.parametrize(("doc", "message"), _PLAN_REFUSALS,
                         ids=[m[:40] for _, m in _PLAN_REFUSALS])
def test_plan_refusals_name_the_item_and_the_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        plan_from_json(_complete_plan(doc), _three_server_state())
    assert str(info.value) == message


# ------------------------------------------------------------------ the schemas

def state_validator() -> Any:
    """A validator of the state schema, built when a test runs (not at import)."""
    return jsonschema.Draft202012Validator(state_schema())


def plan_validator() -> Any:
    return jsonschema.Draft202012Validator(plan_schema())


def test_the_schemas_are_valid_draft_2020_12_schemas() -> None:
    for schema in (state_schema(), plan_schema()):
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert state_schema()["$id"] == "urn:aryl:schema:state:1"
    assert plan_schema()["$id"] == "urn:aryl:schema:plan:1"
    assert state_schema()["title"] == "aryl cluster state"
    assert plan_schema()["title"] == "aryl schedule plan"


def _edge_doc() -> dict[str, Any]:
    """Every field present, each at the edge of its range (all accepted by the reader)."""
    doc = base_doc()
    doc["config"] = {"rescale_pause_s": 0, "checkpoint_interval_s": 0.5, "restart_cost_s": 0,
                     "loan_reserve_servers": 0, "loan_cooldown_s": 0, "starvation_bound_s": 0,
                     "reclaim_policy": "exact", "seed": 0, "backend": "reference",
                     "mix_gpu_types": True}
    doc["speed_model"] = {"reference_gpu_type": "default", "factors": {"T4": 0.5},
                          "table": None, "relative_speed_override": {"T4": 0.25}}
    doc["servers"][1].update(pool="p", gpu_type="T4", reclaimed_s=None)
    doc["inference"] = {"servers_needed": 0, "reclaim_deadline_s": 3.0}
    doc["jobs"][0].update(alpha=1, min_workers=2, max_workers=2, elastic=False, family=None,
                          remaining_s=0, checkpoint_remaining_s=0, next_checkpoint_s=None,
                          restarted=False, queued_since_s=-5.0, waited_s=0,
                          attained_gpu_s=0, attained_at_s=-1.0, progress_at_s=-2.0)
    doc["jobs"][1].update(alpha=0)
    doc["running"] = ["R"]
    doc["elastic_memo"] = {"free_gpus": -1, "loaned_servers": -1}
    return doc


def test_a_document_at_every_edge_is_valid_for_the_schema_and_the_reader() -> None:
    doc = _edge_doc()
    state_validator().validate(doc)
    st = state_from_json(doc)
    state_validator().validate(state_to_json(st))
    doc2 = copy.deepcopy(doc)
    doc2["inference"]["reclaim_deadline_s"] = None
    doc2["servers"][1]["reclaimed_s"] = 4.0
    doc2["jobs"][0]["next_checkpoint_s"] = 7.0
    state_validator().validate(doc2)
    state_from_json(doc2)
    for policy in ("aryl", "random", "fewest-jobs", "most-idle"):
        doc2["config"]["reclaim_policy"] = policy
        state_validator().validate(doc2)
        assert state_from_json(doc2).config.reclaim_policy == policy
    for status in ("serving", "idle"):
        doc2["servers"][1]["status"] = status
        state_validator().validate(doc2)
        state_from_json(doc2)


def _upper_edge_doc() -> dict[str, Any]:
    """Every size at the upper limit of the schema and the reader (where it enters the
    compiled pass), and the infinite starvation bound (null)."""
    doc = base_doc()
    doc["config"].update(seed=2**63 - 1, loan_reserve_servers=2**31 - 1,
                         starvation_bound_s=None)
    doc["servers"][0]["gpus"] = 2**20
    doc["jobs"][1].update(max_workers=2**31 - 1, remaining_s=1e12, checkpoint_remaining_s=1e12)
    doc["jobs"][0].update(gpus_per_worker=2**20, ref_workers=2**31 - 1, remaining_s=1e12)
    doc["elastic_memo"] = {"free_gpus": 2**62, "loaned_servers": 2**62}
    return doc


@pytest.mark.parametrize("backend", ["native", "reference"])
def test_a_document_at_every_upper_size_limit_is_valid_and_planned(backend: str) -> None:
    # before: seed 2**63 - 1 passed but 2**63 reached the compiled pass ("Unable to
    # cast"); max_workers 2**31 - 1 sized the knapsack by max_workers (std::bad_alloc).
    # R (2-GPU workers, 3 now) may grow to 2**31 - 1 workers: the table is sized by
    # what can be placed.  Capacity: t0's 2**20 GPUs - R's 4 there, plus i1's 8 - 2:
    # R takes every free GPU it can as 2-GPU workers (alpha 0.05: each one helps).
    doc = _upper_edge_doc()
    state_validator().validate(doc)
    st = state_from_json(doc)
    assert st.config.starvation_bound_s == math.inf
    plan = schedule(st, backend=backend)
    assert plan_to_json(plan, st) == plan_to_json(schedule(st, backend="reference"), st)
    (j, place, _), = plan.resizes
    assert st.job_id[j] == "R"
    assert place == {0: (2**20 - 4) // 2 + 2, 2: 4}
    state_validator().validate(state_to_json(st))


def test_the_compiled_pass_sizes_its_rows_by_what_can_be_placed(tmp_path: Path) -> None:
    # R may grow to 2**31 - 1 workers: a row of throughputs sized by max_workers
    # would take 16 GiB (the compiled pass's per-job rows once were, and a CI machine
    # killed the test above for it); sized by what can be placed it is a few MB.
    # Peak memory of a fresh process (ru_maxrss, KiB), two passes (the second reads
    # the rows the first kept).
    doc = tmp_path / "state.json"
    doc.write_text(json.dumps(_upper_edge_doc(), allow_nan=False), encoding="utf-8")
    code = ("import json, resource, sys\n"
            "from aryl.scheduling import schedule\n"
            "from aryl.scheduling.jsonio import state_from_json\n"
            "st = state_from_json(json.loads(open(sys.argv[1], encoding='utf-8').read()))\n"
            "plans = [schedule(st, backend='native') for _ in range(2)]\n"
            "assert plans[0].resizes, 'R was not resized'\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", code, str(doc)], capture_output=True,
                         text=True, timeout=120, check=True)
    assert int(out.stdout) < 1_000_000, out.stdout  # under 1 GB


_ABOVE_1E9 = math.nextafter(1e9, math.inf)
_ABOVE_1E12 = math.nextafter(1e12, math.inf)


def test_durations_at_their_bound_are_valid_for_the_schema_and_the_reader() -> None:
    doc = _upper_edge_doc()
    doc["config"].update(rescale_pause_s=1e9, checkpoint_interval_s=1e9, restart_cost_s=1e9,
                         loan_cooldown_s=1e9, starvation_bound_s=1e9)
    state_validator().validate(doc)
    assert state_from_json(doc).config.starvation_bound_s == 1e9


_BOTH_REFUSE_UPPER = [
    _set(["config", "rescale_pause_s"], _ABOVE_1E9),
    _set(["config", "checkpoint_interval_s"], _ABOVE_1E9),
    _set(["config", "restart_cost_s"], _ABOVE_1E9),
    _set(["config", "loan_cooldown_s"], _ABOVE_1E9),
    _set(["config", "starvation_bound_s"], _ABOVE_1E9),
    _set(["jobs", 0, "remaining_s"], _ABOVE_1E12),
    _set(["jobs", 1, "remaining_s"], _ABOVE_1E12),
    _set(["jobs", 1, "checkpoint_remaining_s"], _ABOVE_1E12),
    _set(["config", "seed"], 2**63),
    _set(["config", "loan_reserve_servers"], 2**31),
    _set(["servers", 0, "gpus"], 2**20 + 1),
    _set(["jobs", 1, "max_workers"], 2**31),
    _set(["jobs", 0, "gpus_per_worker"], 2**20 + 1),
    _set(["jobs", 0, "ref_workers"], 2**31),
    _set(["elastic_memo", "free_gpus"], 2**62 + 1),
    _set(["elastic_memo", "loaned_servers"], -2),
    _set(["jobs", 1, "placement", 0, "workers"], 2**31),
]


@pytest.mark.parametrize("edit", _BOTH_REFUSE_UPPER)
def test_one_step_past_a_size_limit_is_refused_by_the_schema_and_the_reader(edit: Any) -> None:
    doc = _upper_edge_doc()
    edit(doc)
    assert not state_validator().is_valid(doc)
    with pytest.raises(InvalidInputError):
        state_from_json(doc)


_BOTH_REFUSE = [
    _set(["schema_version"], 2),
    _drop(["now_s"]),
    _set(["now_s"], "x"),
    _drop(["servers"]),
    _set(["servers"], []),
    _set(["config", "rescale_pause_s"], -0.5),
    _set(["config", "checkpoint_interval_s"], 0),
    _set(["config", "restart_cost_s"], -1),
    _set(["config", "loan_reserve_servers"], -1),
    _set(["config", "loan_reserve_servers"], 0.5),
    _set(["config", "loan_cooldown_s"], -1),
    _set(["config", "starvation_bound_s"], -1),
    _set(["config", "reclaim_policy"], "best"),
    _set(["config", "seed"], -1),
    _set(["config", "backend"], "gpu"),
    _set(["config", "mix_gpu_types"], 1),
    _set(["config", "other"], 1),
    _set(["speed_model", "factors", "T4"], 0),
    _set(["speed_model", "relative_speed_override", "T4"], 0),
    _set(["speed_model", "table"], "mine"),
    _set(["speed_model", "reference"], "x"),
    _drop(["servers", 1, "id"]),
    _set(["servers", 1, "id"], ""),
    _drop(["servers", 1, "role"]),
    _set(["servers", 1, "role"], "spare"),
    _drop(["servers", 1, "gpus"]),
    _set(["servers", 1, "gpus"], 0),
    _set(["servers", 1, "status"], "busy"),
    _set(["servers", 1, "reclaimed_s"], "x"),
    _set(["servers", 1, "x"], 1),
    _set(["inference", "servers_needed"], -1),
    _set(["inference", "reclaim_deadline_s"], "x"),
    _set(["inference", "x"], 1),
    _drop(["jobs", 0, "id"]),
    _drop(["jobs", 0, "arrival_s"]),
    _drop(["jobs", 0, "gpus_per_worker"]),
    _drop(["jobs", 0, "ref_workers"]),
    _drop(["jobs", 0, "status"]),
    _drop(["jobs", 0, "remaining_s"]),
    _set(["jobs", 0, "gpus_per_worker"], 0),
    _set(["jobs", 0, "ref_workers"], 0),
    _set(["jobs", 0, "min_workers"], 0),
    _set(["jobs", 0, "max_workers"], 0),
    _set(["jobs", 0, "elastic"], "no"),
    _set(["jobs", 0, "alpha"], 1.5),
    _set(["jobs", 0, "alpha"], -0.5),
    _set(["jobs", 0, "family"], 3),
    _set(["jobs", 0, "status"], "done"),
    _set(["jobs", 0, "remaining_s"], -1),
    _set(["jobs", 0, "checkpoint_remaining_s"], "x"),
    _set(["jobs", 0, "next_checkpoint_s"], "x"),
    _set(["jobs", 0, "restarted"], 0),
    _set(["jobs", 0, "waited_s"], -1),
    _set(["jobs", 0, "attained_gpu_s"], -1),
    _set(["jobs", 0, "x"], 1),
    _set(["jobs", 1, "placement", 0, "workers"], 0),
    _set(["jobs", 1, "placement", 0, "gpus"], 1),
    _drop(["jobs", 1, "placement", 0, "server"]),
    _drop(["jobs", 1, "placement", 0, "workers"]),
    _set(["running"], "R"),
    _set(["elastic_memo"], {"free_gpus": 0}),
    _set(["elastic_memo"], {"free_gpus": 0, "loaned_servers": 0.5}),
    _set(["elastic_memo"], {"free_gpus": 0, "loaned_servers": 0, "x": 1}),
    _set(["x"], 1),
    # values of the wrong JSON type (a schema without "type" lets them through)
    _set(["config"], [1]),
    _set(["config", "rescale_pause_s"], "0"),
    _set(["config", "checkpoint_interval_s"], "1"),
    _set(["config", "restart_cost_s"], "0"),
    _set(["config", "loan_cooldown_s"], "0"),
    _set(["config", "starvation_bound_s"], "0"),
    _set(["speed_model"], [1]),
    _set(["inference"], [1]),
    _set(["jobs"], {"Q": 1}),
    _set(["jobs", 0], "Q"),
    _set(["jobs", 0, "alpha"], "0.5"),
    _set(["jobs", 0, "attained_gpu_s"], "0"),
    _set(["servers", 1], "i0"),
    _set(["running"], [1]),
    _set(["elastic_memo"], [1, 1]),
]


@pytest.mark.parametrize("edit", _BOTH_REFUSE)
def test_one_step_past_an_edge_is_refused_by_the_schema_and_the_reader(edit: Any) -> None:
    doc = _edge_doc()
    edit(doc)
    assert not state_validator().is_valid(doc)
    with pytest.raises(InvalidInputError):
        state_from_json(doc)


def test_a_document_that_is_not_an_object_is_refused_by_both() -> None:
    assert not state_validator().is_valid([base_doc()])
    assert not plan_validator().is_valid([])
    with pytest.raises(InvalidInputError):
        state_from_json(json.dumps([base_doc()]))


def test_the_plan_schema_requires_and_restricts_each_section() -> None:
    st = _three_server_state()
    ok = plan_to_json(SchedulePlan(now_s=100.0, starts=[(0, {0: 2}, Reason.SJF_ORDER)],
                                   borrowed_servers=[(1, Reason.LOAN_KEPT)]), st)
    plan_validator().validate(ok)
    for key in ("now_s", "reclaim", "borrow", "preempt", "resize", "start", "return"):
        bad = copy.deepcopy(ok)
        del bad[key]
        assert not plan_validator().is_valid(bad), key
    for key in ("actions", "servers", "shortfall"):
        bad = copy.deepcopy(ok)
        del bad["reclaim"][key]
        assert not plan_validator().is_valid(bad), key
    edits = [
        lambda d: d.update(reclaim=[]),
        lambda d: d["reclaim"].update(actions={}),
        lambda d: d["reclaim"].update(servers="i0"),
        lambda d: d.update(preempt={}),
        lambda d: d.update(resize={}),
        lambda d: d.update(start={}),
        lambda d: d.update(borrow={}),
        lambda d: d.update(**{"return": {}}),
        lambda d: d.update(extra=1),
        lambda d: d.update(schema_version=2),
        lambda d: d.update(now_s="x"),
        lambda d: d["reclaim"].update(shortfall=-1),
        lambda d: d["reclaim"].update(extra=1),
        lambda d: d["reclaim"].update(servers=[""]),
        lambda d: d["reclaim"].update(actions=[{"job": "Q"}]),
        lambda d: d["start"][0].update(reason="fifo"),
        lambda d: d["start"][0].update(extra=1),
        lambda d: d["start"][0].pop("job"),
        lambda d: d["start"][0]["placement"][0].update(workers=0),
        lambda d: d["start"][0]["placement"][0].pop("server"),
        lambda d: d["start"][0]["placement"][0].update(extra=1),
        lambda d: d["borrow"][0].update(reason="lent"),
        lambda d: d["borrow"][0].pop("server"),
        lambda d: d["borrow"][0].update(extra=1),
        lambda d: d["borrow"][0].update(server=""),
        lambda d: d.update(preempt=[{"job": "R"}]),
        lambda d: d.update(resize=[{"job": "R", "reason": "no"}]),
        lambda d: d.update(elastic_memo={"free_gpus": 1}),
        lambda d: d.update(elastic_memo={"free_gpus": 1.5, "loaned_servers": 0}),
        lambda d: d.update(elastic_memo={"free_gpus": 1, "loaned_servers": 0, "x": 1}),
        lambda d: d.update(**{"return": [{"server": "i0", "reason": "x"}]}),
    ]
    for i, edit in enumerate(edits):
        bad = copy.deepcopy(ok)
        edit(bad)
        assert not plan_validator().is_valid(bad), i
    # every reason code of the plan is in the schema's vocabulary
    reasons = plan_schema()["properties"]["start"]["items"]["properties"]["reason"]["enum"]
    assert reasons == [r.name.lower() for r in Reason]


def test_the_schemas_describe_what_a_client_must_know() -> None:
    """The descriptions state the contract of docs/integration.md and of the reader.

    Each is a sentence (capital first letter, final full stop) that says, in these
    words, the rule a client in another language relies on.
    """
    st = state_schema()
    props = st["properties"]
    jobs = props["jobs"]["items"]["properties"]
    described = {
        "state": (st["description"], ["Times in seconds", "reference size (ref_workers"]),
        "speed_model": (props["speed_model"]["description"], ["null: every type equally fast"]),
        "servers": (props["servers"]["description"],
                    ["Training servers first, then inference servers"]),
        "reclaim_deadline_s": (
            props["inference"]["properties"]["reclaim_deadline_s"]["description"],
            ["once it has come, every missing inference server is due; null: nothing asked"]),
        "reclaim_requests": (
            props["inference"]["properties"]["reclaim_requests"]["description"],
            ["each rise of the inference demand with its own deadline",
             "earliest deadline first"]),
        "next_wakeup_s": (plan_schema()["properties"]["next_wakeup_s"]["description"],
                          ["call the pass again by then", "null: no timed rule pending"]),
        "jobs": (props["jobs"]["description"],
                 ["Active jobs (queued and running) in arrival order",
                  "position breaks ties"]),
        "family": (jobs["family"]["description"], ["Model family"]),
        "waited_s": (jobs["waited_s"]["description"],
                     ["queue age = waited_s + now - queued_since_s"]),
        "placement": (jobs["placement"]["description"], ["Workers of one job per server"]),
        "running": (props["running"]["description"], ["in the order they started"]),
        "plan": (plan_schema()["description"],
                 ["reclaim.actions, reclaim.servers returned, borrow, preempt, resize (all "
                  "removals, then the new placements), start, return"]),
    }
    for name, (text, phrases) in described.items():
        assert isinstance(text, str), name
        assert text[0].isupper(), name
        assert text.endswith("."), name
        for phrase in phrases:
            assert phrase in text, (name, phrase)
    # the queue age a client computes from the description is the state's
    doc = base_doc()
    doc["jobs"][0].update(waited_s=7.0, queued_since_s=60.0)
    assert state_from_json(doc).queue_age_s(0) == 7.0 + 100.0 - 60.0


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        # each field is checked by the reader before the state sees it (the state's own
        # checks word it differently)
        (_set(["servers", 1, "role"], 7),
         "servers[1] ('i0').role: must be a non-empty string, got 7"),
        (_set(["jobs", 0, "id"], 3), "jobs[0].id: must be a non-empty string, got 3"),
        (_set(["jobs", 0, "status"], 1),
         "jobs[0] ('Q').status: must be a non-empty string, got 1"),
        (_set(["jobs", 0, "ref_workers"], 2.0),
         "jobs[0] ('Q').ref_workers: must be an integer, got 2.0"),
        (_set(["jobs", 0, "arrival_s"], "soon"),
         "jobs[0] ('Q').arrival_s: must be a finite number, got 'soon'"),
        (_set(["jobs", 0, "gpus_per_worker"], 1.5),
         "jobs[0] ('Q').gpus_per_worker: must be an integer, got 1.5"),
        (_set(["jobs", 0, "remaining_s"], "x"),
         "jobs[0] ('Q').remaining_s: must be a finite number, got 'x'"),
        (_set(["jobs", 1, "placement", 1], {"server": 5, "workers": 1}),
         "jobs[1] ('R').placement[1].server: must be a non-empty string, got 5"),
        (_set(["jobs", 1, "placement", 1], {"server": "i1", "workers": 1.5}),
         "jobs[1] ('R').placement[1].workers: must be an integer, got 1.5"),
        (lambda d: d["jobs"][0].update(colour=1, size=2),
         "jobs[0]: unknown field(s) 'colour', 'size'"),
    ],
)
def test_the_reader_checks_each_field_itself(edit: Any, message: str) -> None:
    doc = base_doc()
    edit(doc)
    assert refused(doc) == message


def test_a_document_without_jobs_or_a_reference_type() -> None:
    doc = base_doc()
    del doc["jobs"]
    st = state_from_json(doc)
    assert st.n_jobs == 0
    assert st.n_servers == 3
    doc = base_doc()
    doc["speed_model"] = {"factors": {"T4": 0.5}}
    assert state_from_json(doc).speeds.reference_gpu_type == "default"  # type: ignore[union-attr]
    doc["speed_model"] = {"reference_gpu_type": "V100", "factors": {"T4": 0.5}}
    assert state_from_json(doc).speeds.reference_gpu_type == "V100"  # type: ignore[union-attr]


def test_the_largest_remaining_time_still_gets_its_extra_workers() -> None:
    # R (1..3 workers of 2 GPUs, 3 running) at the bound: the pass keeps its 3 workers and
    # the plan equals the one at 500 s, so no value of the pass overflowed at the bound
    def plan_at(rem: float) -> dict[str, Any]:
        doc = base_doc()
        doc["jobs"][1]["remaining_s"] = rem
        st = state_from_json(doc)
        return plan_to_json(schedule(st), st)

    top = plan_at(1e12)
    assert top == plan_at(500.0)
    assert top["resize"] == []
    assert top["preempt"] == []
