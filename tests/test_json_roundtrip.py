"""Every field of every JSON document survives a round trip and decides the same.

The documents: the cluster state (with its ``config`` and ``speed_model``
sections, and a speed table written whole), the plan, and the speed table on its
own (:meth:`aryl.speeds.SpeedTable.to_dict`).  For each:

* a MAXIMAL document (every optional field set, to a value other than its
  default) is valid for the published JSON Schema (``jsonschema`` judges), goes
  through ``json.dumps(allow_nan=False)`` (strict JSON: no ``Infinity``), is read
  and written again, and comes back identical;
* the state read back decides as the original does: the plan of both backends
  (compiled and Python) from the round-tripped state equals the plan from the
  original, and so does the state after applying it;
* hypothesis builds states by running the pass over random clusters and jobs
  (preemptions, reclaims, loans, checkpoints, finished jobs) and checks the same.

What this closes: a field lost or changed on reading (``starvation_bound_s=inf``
written as ``Infinity``, a custom speed table written as ``"bundled"``) used to
survive every test, because documents with every optional field were checked
against the schema but never read back and compared.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hst

from aryl.errors import InvalidInputError
from aryl.scheduling import ClusterState, SchedulePlan, SchedulerConfig, schedule
from aryl.scheduling.jsonio import plan_from_json, plan_to_json, state_from_json, state_to_json
from aryl.scheduling.schema import plan_schema, state_schema
from aryl.scheduling.speed import SpeedModel
from aryl.scheduling.state import MAX_SEED, RECLAIM_POLICIES
from aryl.speeds import SpeedTable

jsonschema = pytest.importorskip("jsonschema")

BACKENDS = ("native", "reference")


def strict(doc: Any) -> str:
    """``doc`` as strict JSON (raises ValueError on NaN or an infinity)."""
    return json.dumps(doc, allow_nan=False)


def custom_table_doc() -> dict[str, Any]:
    """A measured table unlike the bundled one: bert is *slower* on A100 (0.5 of a V100;
    the bundled table has 2.07585), with the "flat" extrapolation and its own source."""
    return {
        "kind": "measured", "reference": "V100", "extrapolation": "flat",
        "source": "custom.csv",
        "pairs": [
            {"family": "bert", "gpu_type": "A100", "relative_speed": 0.5,
             "replicas": [1, 2, 4], "scaling": [1.0, 1.75, 3.0]},
            {"family": "bert", "gpu_type": "V100", "relative_speed": 1.0,
             "replicas": [1, 2, 4, 8], "scaling": [1.0, 1.9, 3.6, 6.8]},
        ],
    }


def maximal_state_doc(starvation_bound: float | None = 5000.5) -> dict[str, Any]:
    """A state document with every optional field present and not at its default.

    t0 (V100) and t1 (A100) train; i0 is loaned (a bert job's worker on it), i1 idle,
    i2 serving.  The inference side needs 3 servers by 100 s = now: one is missing,
    so the pass reclaims i0.  Jobs a, b run (start order b, a), c and d wait.
    (A training server's ``status`` can only be "training", which the writer leaves
    out: it is the one optional field not set here.)
    """
    return {
        "schema_version": 1,
        "now_s": 100.0,
        "config": {
            "rescale_pause_s": 12.5, "checkpoint_interval_s": 900.25, "restart_cost_s": 7.5,
            "loan_reserve_servers": 0, "loan_cooldown_s": 33.0,
            "starvation_bound_s": starvation_bound, "reclaim_policy": "fewest-jobs",
            "seed": MAX_SEED, "backend": "reference", "mix_gpu_types": True,
        },
        "speed_model": {
            "reference_gpu_type": "V100",
            "factors": {"A100": 1.5},
            "table": custom_table_doc(),
            "relative_speed_override": {"A100": 0.625},
        },
        "servers": [
            {"id": "t0", "role": "training", "gpus": 8, "pool": "train-a", "gpu_type": "V100"},
            {"id": "t1", "role": "training", "gpus": 8, "pool": "train-b", "gpu_type": "A100"},
            {"id": "i0", "role": "inference", "gpus": 8, "pool": "inf", "gpu_type": "V100",
             "status": "loaned", "reclaimed_s": 50.0},
            {"id": "i1", "role": "inference", "gpus": 8, "pool": "inf", "gpu_type": "A100",
             "status": "idle", "reclaimed_s": 40.0},
            {"id": "i2", "role": "inference", "gpus": 8, "pool": "inf", "gpu_type": "V100",
             "status": "serving", "reclaimed_s": 10.0},
        ],
        "inference": {"servers_needed": 3, "reclaim_deadline_s": 100.0,
                      "reclaim_requests": [{"deadline_s": 90.0, "servers": 1},
                                           {"deadline_s": 150.0, "servers": 2}]},
        "jobs": [
            {"id": "a", "family": "bert", "arrival_s": 1.0, "gpus_per_worker": 1,
             "ref_workers": 2, "min_workers": 1, "max_workers": 4, "elastic": True,
             "alpha": 0.1, "status": "running", "remaining_s": 500.5, "progress_at_s": 95.0,
             "checkpoint_remaining_s": 510.0, "next_checkpoint_s": 995.25, "restarted": True,
             "queued_since_s": 5.0, "waited_s": 2.5, "attained_gpu_s": 33.0,
             "attained_at_s": 90.0,
             "placement": [{"server": "t0", "workers": 2}, {"server": "i0", "workers": 1}]},
            {"id": "b", "family": None, "arrival_s": 2.0, "gpus_per_worker": 2,
             "ref_workers": 2, "min_workers": 2, "max_workers": 2, "elastic": False,
             "alpha": 0.2, "status": "running", "remaining_s": 300.0, "progress_at_s": 99.0,
             "checkpoint_remaining_s": 320.0, "next_checkpoint_s": None, "restarted": False,
             "queued_since_s": 3.0, "waited_s": 1.0, "attained_gpu_s": 12.0,
             "attained_at_s": 97.0, "placement": [{"server": "t1", "workers": 2}]},
            {"id": "c", "family": "bert", "arrival_s": 50.0, "gpus_per_worker": 1,
             "ref_workers": 2, "min_workers": 1, "max_workers": 3, "elastic": True,
             "alpha": 0.3, "status": "queued", "remaining_s": 80.0, "progress_at_s": 60.0,
             "checkpoint_remaining_s": 90.0, "next_checkpoint_s": None, "restarted": True,
             "queued_since_s": 70.0, "waited_s": 4.0, "attained_gpu_s": 20.0,
             "attained_at_s": 70.0},
            {"id": "d", "family": None, "arrival_s": 60.0, "gpus_per_worker": 4,
             "ref_workers": 1, "min_workers": 1, "max_workers": 1, "elastic": False,
             "alpha": 0.0, "status": "queued", "remaining_s": 40.0, "progress_at_s": 60.0,
             "checkpoint_remaining_s": 40.0, "next_checkpoint_s": None, "restarted": False,
             "queued_since_s": 60.0, "waited_s": 0.0, "attained_gpu_s": 0.0,
             "attained_at_s": 60.0},
        ],
        "running": ["b", "a"],
        "elastic_memo": {"free_gpus": 3, "loaned_servers": 1},
    }


def plan_docs(st: ClusterState) -> dict[str, Any]:
    """``plan_to_json`` of the plan of each backend for ``st``, and of the state after it."""
    out: dict[str, Any] = {}
    for b in BACKENDS:
        plan = schedule(st, backend=b)
        out[b] = plan_to_json(plan, st)
        out[f"{b} after"] = state_to_json(plan.apply(st))
    return out


def check_round_trip(doc: dict[str, Any]) -> ClusterState:
    """The checks of the module docstring for one state document; the state read back."""
    jsonschema.validate(doc, state_schema())
    st = state_from_json(strict(doc))
    written = state_to_json(st)
    assert written == doc
    st2 = state_from_json(strict(written))
    assert state_to_json(st2) == doc
    assert plan_docs(st2) == plan_docs(st)
    return st


@pytest.mark.parametrize("bound", [5000.5, None])
def test_maximal_state_document_round_trips_and_decides_the_same(bound: float | None) -> None:
    st = check_round_trip(maximal_state_doc(bound))
    assert st.config.starvation_bound_s == (math.inf if bound is None else bound)
    assert st.config.seed == 2**63 - 1
    assert st.speeds is not None
    assert st.speeds.table is not SpeedTable.bundled()
    # the pass does something with every part: i0 reclaimed (a's worker there goes),
    # the plan of both backends alike
    plans = plan_docs(st)
    assert plans["native"] == plans["reference"]
    assert plans["native"]["reclaim"]["servers"] == ["i0"]


def test_infinite_starvation_bound_is_written_as_null_and_read_back() -> None:
    # before: state_to_json wrote Infinity (not JSON) and the reader refused null
    st = ClusterState(config=SchedulerConfig(starvation_bound_s=math.inf))
    st.add_server("t0", role="training", gpus=8)
    doc = state_to_json(st)
    assert doc["config"]["starvation_bound_s"] is None
    assert state_from_json(strict(doc)).config.starvation_bound_s == math.inf


def _bert_state(table: SpeedTable) -> ClusterState:
    """t0 (V100) and t1 (A100), 8 GPUs each; a queued rigid bert job of 4 workers."""
    st = ClusterState(config=SchedulerConfig(loan_reserve_servers=0),
                      speeds=SpeedModel("V100", table=table))
    st.add_server("t0", role="training", gpus=8, gpu_type="V100")
    st.add_server("t1", role="training", gpus=8, gpu_type="A100")
    j = st.add_job("q", arrival_s=0.0, gpus_per_worker=1, ref_workers=4, remaining_s=100.0,
                   family="bert")
    st.enqueue(j, 0.0)
    return st


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_custom_speed_table_survives_and_keeps_the_job_on_its_fastest_type(
    backend: str,
) -> None:
    # The custom table makes bert on A100 0.5 x a V100 (S(4) = 3.0 there, 3.6 on V100):
    # the job starts on t0 (V100).  The bundled table has A100 at 2.07585: there it
    # starts on t1.  Before, the custom table was written as "bundled", so the state
    # read back put the job on the A100.
    custom = SpeedTable.from_dict(custom_table_doc())
    st = _bert_state(custom)
    back = state_from_json(strict(state_to_json(st)))
    for s in (st, back):
        plan = schedule(s, backend=backend)
        assert [(s.job_id[j], p) for j, p, _ in plan.starts] == [("q", {0: 4})]
    bundled = schedule(_bert_state(SpeedTable.bundled()), backend=backend)
    assert [p for _, p, _ in bundled.starts] == [{1: 4}]
    assert state_to_json(_bert_state(SpeedTable.bundled()))["speed_model"]["table"] == "bundled"


def test_speed_tables_round_trip_whole() -> None:
    for table in (SpeedTable.from_dict(custom_table_doc()), SpeedTable.bundled(),
                  SpeedTable.parametric(0.25, {"T4": 0.5, "A100": 2.0})):
        doc = table.to_dict()
        back = SpeedTable.from_dict(json.loads(strict(doc)))
        assert back.to_dict() == doc
        for fam in table.families or ("any",):
            for typ in table.gpu_types or ("V100",):
                for w in (1, 3, 8, 40):  # 40: past every profiled count (extrapolated)
                    assert back.throughput(fam, typ, w, 2) == table.throughput(fam, typ, w, 2)
    assert custom_table_doc() == SpeedTable.from_dict(custom_table_doc()).to_dict()


def maximal_plan_doc() -> dict[str, Any]:
    """A plan document for :func:`maximal_state_doc` with every section filled."""
    return {
        "schema_version": 1,
        "now_s": 120.5,
        "reclaim": {
            "actions": [{"job": "a", "reason": "reclaim_scale_in",
                         "placement": [{"server": "t0", "workers": 2}]},
                        {"job": "b", "reason": "reclaim_preempt"}],
            "servers": ["i0"],
            "shortfall": 1,
        },
        "borrow": [{"server": "i1", "reason": "loan_for_base"}],
        "preempt": [{"job": "b", "reason": "las_preempt"}],
        "resize": [{"job": "a", "reason": "mckp_scale_out",
                    "placement": [{"server": "t0", "workers": 3}, {"server": "i1", "workers": 1}]}],
        "start": [{"job": "c", "reason": "sjf_order",
                   "placement": [{"server": "t1", "workers": 2}]}],
        "return": [{"server": "i1", "reason": "idle_loan"}],
        "elastic_memo": {"free_gpus": 7, "loaned_servers": 2},
        "next_wakeup_s": 720.5,
    }


def test_maximal_plan_document_round_trips() -> None:
    st = state_from_json(maximal_state_doc())
    doc = maximal_plan_doc()
    jsonschema.validate(doc, plan_schema())
    plan = plan_from_json(strict(doc), st)
    assert plan_to_json(plan, st) == doc
    assert plan_from_json(strict(plan_to_json(plan, st)), st) == plan
    assert plan.reclaim_shortfall == 1
    assert plan.elastic_memo == (7, 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_pass_plans_round_trip_and_apply_the_same(backend: str) -> None:
    st = state_from_json(maximal_state_doc())
    plan = schedule(st, backend=backend)
    doc = plan_to_json(plan, st)
    jsonschema.validate(doc, plan_schema())
    back = plan_from_json(strict(doc), st)
    assert plan_to_json(back, st) == doc
    back.n_extra_repairs = plan.n_extra_repairs  # a diagnostic, not part of the document
    assert back == plan
    assert state_to_json(back.apply(st)) == state_to_json(plan.apply(st))


# ------------------------------------------------------------------ hypothesis states

@hst.composite
def pass_states(draw: Any) -> ClusterState:
    """A state after a few passes of the pass over a random cluster and random jobs.

    Between passes: arrivals are enqueued, finished jobs finish, the inference side's
    need changes (a reclaim due now when servers are missing).  So states hold
    loans, reclaimed servers, preempted (restarted) jobs, checkpoints, attained
    service and finished jobs (left out of the document).
    """
    policies = [p for p in RECLAIM_POLICIES if p != "exact"]
    cfg = SchedulerConfig(
        rescale_pause_s=draw(hst.sampled_from([0.0, 30.0])),
        checkpoint_interval_s=draw(hst.sampled_from([50.0, 1800.0])),
        restart_cost_s=draw(hst.sampled_from([0.0, 60.0])),
        loan_reserve_servers=draw(hst.integers(0, 1)),
        loan_cooldown_s=draw(hst.sampled_from([0.0, 600.0])),
        starvation_bound_s=draw(hst.sampled_from([math.inf, 0.0, 150.0])),
        reclaim_policy=draw(hst.sampled_from(policies)),
        seed=draw(hst.integers(0, MAX_SEED)),
    )
    typed = draw(hst.booleans())
    speeds = SpeedModel("V100", factors={"T4": 0.5}) if typed else None
    st = ClusterState(config=cfg, speeds=speeds)
    gpus = draw(hst.sampled_from([4, 8]))
    n_train = draw(hst.integers(1, 3))
    n_inf = draw(hst.integers(0, 3))
    for i in range(n_train):
        st.add_server(f"t{i}", role="training", gpus=gpus,
                      gpu_type="T4" if typed and i % 2 else "V100")
    for i in range(n_inf):
        st.add_server(f"i{i}", role="inference", gpus=gpus, gpu_type="V100")
    n_jobs = draw(hst.integers(1, 8))
    arrivals = sorted(draw(hst.lists(hst.integers(0, 400), min_size=n_jobs, max_size=n_jobs)))
    for k, t in enumerate(arrivals):
        mn = draw(hst.integers(1, 4))
        mx = mn + draw(hst.integers(0, 3))
        st.add_job(f"j{k}", arrival_s=float(t), gpus_per_worker=draw(hst.sampled_from([1, 2])),
                   ref_workers=draw(hst.integers(mn, mx)),
                   remaining_s=float(draw(hst.integers(1, 600))), min_workers=mn,
                   max_workers=mx, elastic=mx > mn,
                   alpha=draw(hst.sampled_from([0.0, 0.05, 0.5])))
    times = sorted(set(arrivals) | set(draw(hst.lists(hst.integers(0, 800), max_size=4))))
    arrived = 0
    for t in times:
        now = float(t)
        for j in list(st.running):
            if st.remaining_at(j, now) == 0.0:
                st.finish(j, now)
        while arrived < n_jobs and st.arrival_s[arrived] <= now:
            st.enqueue(arrived, now)
            arrived += 1
        st.servers_needed = draw(hst.integers(0, n_inf))
        st.reclaim_deadline_s = now if st.reclaim_deficit() else math.inf
        st.set_serving()
        st.now_s = now
        schedule(st, backend="reference").apply(st, inplace=True)
    return st


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pass_states())
def test_states_from_the_pass_round_trip_and_decide_the_same(st: ClusterState) -> None:
    doc = state_to_json(st)
    jsonschema.validate(doc, state_schema())
    back = state_from_json(strict(doc))
    assert state_to_json(back) == doc
    assert plan_docs(back) == plan_docs(st)
    for b in BACKENDS:
        pdoc = plan_to_json(schedule(st, backend=b), st)
        jsonschema.validate(pdoc, plan_schema())
        assert plan_to_json(plan_from_json(strict(pdoc), back), back) == pdoc


def test_a_document_of_one_change_reads_back_changed() -> None:
    # the comparison is not vacuous: one field changed in the document changes what
    # is read (here a's remaining work, and with it the plan's elastic choice)
    doc = maximal_state_doc()
    other = copy.deepcopy(doc)
    other["jobs"][0]["remaining_s"] = 5.0
    assert state_to_json(state_from_json(other)) != doc
    assert SchedulePlan(now_s=1.0) != SchedulePlan(now_s=2.0)


def _api_state() -> ClusterState:
    """t0 (8 GPUs), i0 (inference, idle); a and b queued at 0 s and 5 s; now 10 s."""
    st = ClusterState(now_s=10.0)
    st.add_server("t0", role="training", gpus=8)
    st.add_server("i0", role="inference", gpus=8)
    for name, t in (("a", 0.0), ("b", 5.0)):
        j = st.add_job(name, arrival_s=t, gpus_per_worker=1, ref_workers=2, remaining_s=9.0)
        st.enqueue(j, t)
    return st


def _set_attr(name: str, index: int | None, value: Any) -> Any:
    def edit(st: ClusterState) -> None:
        if index is None:
            setattr(st, name, value)
        else:
            getattr(st, name)[index] = value
    return edit


@pytest.mark.parametrize(("edit", "message"), [
    # each would be written as a document that does not read back the same (an
    # infinity turned null, NaN not JSON) or that the reader refuses
    (_set_attr("reclaim_deadline_s", None, math.nan),
     "state.inference.reclaim_deadline_s: must be a finite number or inf (none asked), got nan"),
    (_set_attr("reclaim_deadline_s", None, -math.inf),
     "state.inference.reclaim_deadline_s: must be a finite number or inf (none asked), got -inf"),
    (_set_attr("server_reclaimed_s", 1, math.inf),
     "servers[1] ('i0').reclaimed_s: must be a time up to now_s 10.0 or -inf (never), got inf"),
    (_set_attr("server_reclaimed_s", 1, 11.0),
     "servers[1] ('i0').reclaimed_s: must be a time up to now_s 10.0 or -inf (never), "
     "got 11.0"),
    (_set_attr("next_checkpoint_s", 0, -math.inf),
     "jobs[0] ('a').next_checkpoint_s: must be a finite number or inf (none), got -inf"),
    (_set_attr("waited_s", 1, math.inf),
     "jobs[1] ('b').waited_s: must be a finite number, got inf"),
    (_set_attr("queued_since_s", 0, math.nan),
     "jobs[0] ('a').queued_since_s: must be a finite number, got nan"),
    (_set_attr("servers_needed", None, 2),
     "state.inference.servers_needed: 2 is more than the 1 inference server(s)"),
    (_set_attr("arrival_s", 1, -1.0),
     "jobs[1] ('b').arrival_s: -1.0 is before 0.0 of jobs[0] ('a'); list the jobs in arrival "
     "order (the position breaks ties between equal times)"),
])
def test_state_to_json_writes_only_what_reads_back(edit: Any, message: str) -> None:
    st = _api_state()
    assert state_from_json(strict(state_to_json(st))) is not None
    edit(st)
    with pytest.raises(InvalidInputError) as info:
        state_to_json(st)
    assert str(info.value) == message
