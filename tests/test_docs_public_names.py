"""The names docs/integration.md and docs/architecture.md tell a user to import
exist there: ``aryl.scheduling.state_to_json`` and its three siblings (they were
only in ``aryl.scheduling.jsonio``, so the documented import failed)."""

from __future__ import annotations

import json

import aryl


def _state() -> aryl.ClusterState:
    # README's example: one 8-GPU training server, one idle 8-GPU inference server,
    # an elastic job of 4 x 1 GPU (2 .. 16 workers)
    st = aryl.ClusterState(config=aryl.SchedulerConfig(loan_reserve_servers=0))
    st.add_server("t0", role="training", gpus=8)
    st.add_server("i0", role="inference", gpus=8, status="idle")
    a = st.add_job("a", arrival_s=0.0, gpus_per_worker=1, ref_workers=4, remaining_s=3600.0,
                   min_workers=2, max_workers=16, elastic=True)
    st.enqueue(a, 0.0)
    return st


def test_the_documented_json_functions_import_from_aryl_scheduling() -> None:
    from aryl.scheduling import plan_from_json, plan_to_json, state_from_json, state_to_json

    st = _state()
    doc = state_to_json(st)
    # "state_to_json of a state read back is the document again, and it decides the same"
    back = state_from_json(json.dumps(doc))
    assert state_to_json(back) == doc
    plan = aryl.schedule(back, policy="aryl")
    out = plan_to_json(plan, back)
    # a starts on t0 (8 workers: its base 4 plus 4 extra) and grows onto the borrowed i0
    assert [(s["job"], [(p["server"], p["workers"]) for p in s["placement"]])
            for s in out["start"]] == [("a", [("t0", 8), ("i0", 8)])]
    assert [b["server"] for b in out["borrow"]] == ["i0"]
    assert plan_to_json(plan_from_json(json.dumps(out), back), back) == out


def test_the_sample_state_of_the_docs_is_readmes_state_and_plans_it() -> None:
    from pathlib import Path

    from click.testing import CliRunner

    from aryl.cli import main
    from aryl.scheduling import state_to_json

    sample = Path(__file__).parents[1] / "docs" / "examples" / "state.json"
    assert json.loads(sample.read_text()) == state_to_json(_state())
    r = CliRunner().invoke(main, ["plan", str(sample)])
    assert r.exit_code == 0, r.output
    plan = json.loads(r.output)
    assert [b["server"] for b in plan["borrow"]] == ["i0"]
    assert [(p["server"], p["workers"]) for p in plan["start"][0]["placement"]] == \
        [("t0", 8), ("i0", 8)]
