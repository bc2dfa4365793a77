"""``aryl policies``: the scheduling policies this installation can run.

The registered policies (compiled, with Python twins), those twins through the
policy callback (``aryl-twin``..., :mod:`aryl.scheduling.twin`) and the Python policies
installed packages register in the entry-point group ``aryl.policies``
(docs/policies.md), each with its options and defaults, whether it loans
inference servers and scales elastic jobs, and (for a Python policy) the
version a sweep's run key records.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console

__all__ = ["policies_command", "policy_rows"]


def policy_rows() -> list[dict[str, Any]]:
    """One row per policy: registered ones first (by name), then their twins
    through the callback, then entry points
    (by name; one that cannot be loaded says why in ``error``)."""
    from aryl.scheduling.registry import POLICIES, entry_point_policies, twin_policies
    from aryl.scheduling.user import Policy as UserPolicy
    from aryl.scheduling.user import policy_identity

    rows: list[dict[str, Any]] = []
    for name in sorted(POLICIES):
        cls = POLICIES[name]
        opts = {k: (True if k == "return_idle_loans" else None) for k in cls.options_known}
        rows.append({"name": name, "source": "registered", "class": f"{cls.__module__}:"
                     f"{cls.__qualname__}", "version": None, "loans": cls.loans,
                     "elastic": cls.elastic, "options": opts, "error": None})
    for name, tcls in twin_policies().items():
        rows.append({"name": name, "source": f"registered twin of {tcls.twin} (callback)",
                     "class": f"{tcls.__module__}:{tcls.__qualname__}",
                     "version": policy_identity(tcls)["version"], "loans": tcls.loans,
                     "elastic": tcls.elastic,
                     "options": {k: (True if k == "return_idle_loans" else None)
                                 for k in POLICIES[tcls.twin].options_known},
                     "error": None})
    for name, ep in entry_point_policies().items():
        row: dict[str, Any] = {"name": name, "source": f"entry point ({ep.value})",
                               "class": ep.value, "version": None, "loans": None,
                               "elastic": None, "options": {}, "error": None}
        try:
            cls = ep.load()
            if not (isinstance(cls, type) and issubclass(cls, UserPolicy)):
                raise TypeError(f"{cls!r} is not an aryl.Policy subclass")
            row.update(loans=cls.loans, elastic=cls.elastic,
                       options={"return_idle_loans": True, **dict(cls.defaults)},
                       version=policy_identity(cls)["version"])
        except Exception as e:  # a broken package: listed with its error, not fatal
            row["error"] = f"{type(e).__name__}: {e}"
        rows.append(row)
    return rows


def _opts_text(opts: dict[str, Any]) -> str:
    # every default shown, None as JSON's null (starvation_bound_s=null: no bound)
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in opts.items()) or "-"


@click.command(name="policies")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def policies_command(as_json: bool) -> None:
    """List the policies `aryl replay/compare/sweep` accept, with their options.

    Besides these names, any `module:Class` naming an aryl.Policy subclass
    works (docs/policies.md).  Options are set with --set policy.NAME=VALUE
    (registered ones) or a sweep's policy_options.
    """
    from aryl.cli._tables import Col, print_tables

    rows = policy_rows()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    yn = {True: "yes", False: "no", None: "?"}
    cells = [[r["name"], r["source"], yn[r["loans"]], yn[r["elastic"]],
              _opts_text(r["options"]) if r["error"] is None else f"cannot load: {r['error']}",
              r["version"] or "-"] for r in rows]
    print_tables(Console(), [Col("policy", "left"), Col("source", "left"), Col("loans"),
                             Col("elastic"), Col("options (defaults)", "left"),
                             Col("version", "left")],
                 cells, title="aryl policies", caption="module:Class strings work too "
                 "(docs/policies.md)")
