"""The ``aryl`` command line.

Subcommands live in their own modules and are imported only when invoked (the
lazy-group pattern from click's documentation), so ``aryl --help`` is fast and
one broken subcommand cannot take the others down.  Terminal output happens
only in this package; library code logs through :mod:`logging`.
"""

from __future__ import annotations

import importlib
import logging

import click

from aryl import __version__

# command name -> "module:attribute" of a click command or group
_SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "solve": ("aryl.cli.solve", "Solve one elastic-allocation (MCKP) instance from a CSV."),
    "trace": ("aryl.cli.trace", "Inspect and convert job traces."),
    "replay": ("aryl.cli.replay", "Replay a trace through the simulator under one policy."),
    "compare": ("aryl.cli.replay", "Replay a trace under several policies, side by side."),
    "experiment": ("aryl.cli.experiment", "Regenerate the paper-style evaluation."),
    "config": ("aryl.cli.config", "List every field that --set and --config accept."),
    "plan": ("aryl.cli.plan", "One scheduling pass over a cluster-state JSON; the plan as JSON."),
    "schema": ("aryl.cli.plan", "Print the JSON Schema of the state or plan document."),
    "sweep": ("aryl.cli.sweep", "Run a grid of replays (all cores or Ray) and report over seeds."),
    "k8s": ("aryl.cli.k8s", "Schedule TrainingJobs on a Kubernetes cluster (the controller)."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(_SUBCOMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in _SUBCOMMANDS:
            module_name, _ = _SUBCOMMANDS[cmd_name]
            module = importlib.import_module(module_name)
            command = getattr(module, cmd_name.replace("-", "_") + "_command")
            if not isinstance(command, click.Command):  # pragma: no cover - programming error
                raise TypeError(f"{module_name}.{cmd_name}_command is not a click command")
            return command
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Use the short help from the table, so --help does not import every subcommand.
        rows = [(name, _SUBCOMMANDS[name][1]) for name in sorted(_SUBCOMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="aryl")
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
def main(verbose: int) -> None:
    """Aryl: loan idle inference servers to training, reclaim them with the fewest
    preemptions, and give spare GPUs to elastic jobs (arXiv:2202.07896, EuroSys'23).

    Start with `aryl replay` (the bundled ITP cluster07 trace under the `aryl`
    policy) or `aryl compare --policies fifo,aryl`.
    """
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
