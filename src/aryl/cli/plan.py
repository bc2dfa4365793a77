"""``aryl plan`` and ``aryl schema``: the scheduling pass for clients in any language.

``aryl plan STATE.json`` reads a cluster-state document (``-`` for standard
input), runs one pass of ``--policy`` and prints the plan document on standard
output (nothing else goes there); ``aryl schema state|plan`` prints the JSON
Schema of either document.  docs/integration.md shows a cluster manager's loop.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from aryl.errors import InvalidInputError

__all__ = ["plan_command", "schema_command"]


def _option_value(raw: str) -> Any:
    """An option value: JSON when it parses (numbers, true/false, lists), else the string."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


@click.command("plan")
@click.argument("state_file", metavar="STATE.json", type=click.Path(dir_okay=False,
                                                                      allow_dash=True))
@click.option("--policy", default="aryl", show_default=True,
              help="aryl, aryl-no-elastic, aryl-no-loan, elastic-greedy, fifo, fifo-backfill, "
                   "sjf, tiresias; an installed one (`aryl policies`) or module:Class "
                   "(docs/policies.md).")
@click.option("--option", "options", multiple=True, metavar="NAME=VALUE",
              help="Policy option (repeatable), e.g. return_idle_loans=false.")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write the plan to this file (atomically) instead of standard output.")
def plan_command(state_file: str, policy: str, options: tuple[str, ...], out: str | None) -> None:
    """Print the plan of one scheduling pass over STATE.json (JSON in, JSON out).

    The state document's format: `aryl schema state`; the plan's: `aryl schema plan`.
    Exit status 2 with a message naming the field on invalid input.
    """
    from aryl.cli._errors import check_out, decode_text, read_text
    from aryl.scheduling import schedule
    from aryl.scheduling.jsonio import plan_to_json, state_from_json

    opts: dict[str, Any] = {}
    for item in options:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--option")
        opts[name.strip()] = _option_value(raw.strip())
    check_out(out, "--out", folder=False)
    # bytes decoded here, so a non-UTF-8 file is an input error (exit 2), not a traceback
    where = "standard input" if state_file == "-" else state_file
    text = (decode_text(sys.stdin.buffer.read(), where) if state_file == "-"
            else read_text(state_file, "STATE.json"))
    try:
        state = state_from_json(text)
    except InvalidInputError as exc:
        raise click.UsageError(f"{where}: {exc}") from None
    try:
        plan = schedule(state, policy=policy, options=opts or None)
    except InvalidInputError as exc:
        raise click.UsageError(str(exc)) from None
    text = json.dumps(plan_to_json(plan, state), indent=1, allow_nan=False) + "\n"
    if out is not None:
        from aryl._io import atomic_write_text

        atomic_write_text(out, text)
    else:
        click.echo(text, nl=False)


@click.command("schema")
@click.argument("document", type=click.Choice(["state", "plan"]))
def schema_command(document: str) -> None:
    """Print the JSON Schema of the state or the plan document."""
    from aryl.scheduling.schema import plan_schema, state_schema

    doc = state_schema() if document == "state" else plan_schema()
    click.echo(json.dumps(doc, indent=1))
