"""The ``throughput`` command line.

One module per command family registers its commands on :data:`cli`. Errors become
one line on stderr and an exit code (2: usage, 1: runtime failure, 130/143:
interrupted); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import signal
import sys

import click

from ..errors import ThroughputError
from ..redact import redact_text
from ..storage import quiet_exit_reports
from .common import err_console


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived; unwinds like KeyboardInterrupt so every context manager closes."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.exit_code = 128 + signum


def _raise_interrupted(signum, frame):
    # the first signal starts the clean-up (clusters, servers, the results file); later
    # ones are ignored so that they cannot break it half-way
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="throughput")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Measure how fast big arrays read from storage with Dask, and how it scales."""
    ctx.obj = {"debug": debug}


# command modules register themselves on `cli` when imported
from . import catalogs as _catalogs  # noqa: F401
from . import clusters as _clusters  # noqa: F401
from . import report as _report  # noqa: F401
from . import run as _run  # noqa: F401
from . import sweep as _sweep  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (also used as the console script)."""
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv
    previous = {sig: signal.signal(sig, _raise_interrupted) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        cli.main(args=argv, prog_name="throughput", standalone_mode=False)
        return 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        message = " ".join(redact_text(exc.format_message()).split())  # one line, always
        ctx = getattr(exc, "ctx", None)
        if isinstance(exc, click.UsageError) and ctx is not None:
            message += f" See '{ctx.command_path} --help'."
        err_console.print(f"throughput: error: {message}", markup=False)
        return exc.exit_code if isinstance(exc, click.UsageError) else 1
    except (KeyboardInterrupt, click.exceptions.Abort, Interrupted) as exc:
        err_console.print("throughput: interrupted; every finished row is in the results file", markup=False)
        return getattr(exc, "exit_code", 130)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except ThroughputError as exc:
        if debug:
            raise
        message = " ".join(line.strip() for line in redact_text(str(exc)).splitlines() if line.strip())
        err_console.print(f"throughput: error: {message}", markup=False)
        return exc.exit_code
    except Exception as exc:
        if debug:
            raise
        from ..sweep import one_line

        err_console.print(f"throughput: error: {one_line(exc)} (run with --debug for the traceback)", markup=False)
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def console_main() -> None:
    if "--debug" not in sys.argv[1:]:
        # until the interpreter exits, when the reports come: they would bury the one-line error
        quiet_exit_reports()
    sys.exit(main())


if __name__ == "__main__":
    console_main()
