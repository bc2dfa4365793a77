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
    "policies": ("aryl.cli.policies", "List the scheduling policies, installed ones included."),
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

    def invoke(self, ctx: click.Context) -> object:
        # a safety net: an input error that a command did not word itself is still an
        # input error (exit 2, one line), never a traceback
        from aryl.cli._errors import InputError
        from aryl.errors import InvalidInputError

        try:
            return super().invoke(ctx)
        except InvalidInputError as exc:
            raise InputError(str(exc)) from None
        except KeyboardInterrupt:  # commands that write say more themselves (replay, sweep)
            import sys

            from aryl.cli._errors import EXIT_INTERRUPTED

            click.echo("Interrupted. No output was changed (every file is written "
                       "atomically).", err=True)
            sys.exit(EXIT_INTERRUPTED)

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
    _quiet_python_warnings(verbose)


def _quiet_python_warnings(verbose: int) -> None:
    """Python warnings (from libraries, not aryl's messages) only with ``-v``.

    They go to the ``py.warnings`` logger, shown from ``-v`` on.  The
    multiprocessing resource tracker (a separate process that the process
    pools start) inherits the interpreter's ``-W`` options: after a Ctrl-C
    ends the pool's workers it unlinks their semaphores and would say so
    ("There appear to be N leaked semaphore objects"); the filter keeps that
    clean-up quiet.
    """
    import sys

    logging.captureWarnings(True)
    logging.getLogger("py.warnings").setLevel(logging.WARNING if verbose else logging.ERROR)
    quiet = "ignore:resource_tracker:UserWarning"
    if not verbose and quiet not in sys.warnoptions:
        sys.warnoptions.append(quiet)
