"""``tooluse-datasets``: demo, export, validate, stats (and mirror/publish, see their modules).

Each subcommand is a module under ``tooluse_datasets/commands/`` exposing ``add_parser(subparsers)`` and
``run(args) -> int``; adding one is adding a module (commands are discovered, listed alphabetically).
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import errno
import importlib
import io
import logging
import os
import pkgutil
import signal
import stat
import sys

from datasets.exceptions import DatasetsError

from .errors import DataNotFoundError, ToolUseDataError, plain_printable, raised_within
from .progress import library_bars_on_terminal_only
from .source import UnknownOptionError



def command_names() -> list[str]:
    from . import commands

    return sorted(m.name for m in pkgutil.iter_modules(commands.__path__) if not m.name.startswith("_"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tooluse-datasets",
        description="Tool-use training data (NESTFUL, ms-swift agent format, ToolMind, LLaMA-Factory) as Hugging Face datasets.",
        # (the statuses a script tests for were in the README only)
        epilog=f"exit status: 0 done; 1 the data failed the command (validate, verify; export with no row to write); "
               f"2 bad input or usage, said in one 'error: ...' line on standard error; 130 interrupted (Ctrl-C); "
               f"{EXIT_TERMINATED} stopped by SIGTERM; {EXIT_BROKEN_PIPE} the reader of the output went away (| head). "
               f"Rows, tables and JSON go to standard output; progress, warnings and errors to standard error. "
               f"'tooluse-datasets COMMAND --help' describes each command.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in command_names():
        module = importlib.import_module(f"tooluse_datasets.commands.{name}")
        p = module.add_parser(sub)
        # also after the subcommand, where one adds it to rerun a command (as a bug's error line asks); SUPPRESS
        # keeps a -v given before the subcommand
        p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                       help="log progress (as before the subcommand)")
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(build_parser(), argv)
    if sys.stderr is None:
        # Closed (2>&-): Python has no stream for it. Messages are dropped, as on an error pipe whose reader went,
        # and the exit status tells a failure (they would go to standard output, print's default, or fail).
        sys.stderr = open(os.devnull, "w")
    if sys.stdout is None:  # closed (>&-): whatever the command printed would go nowhere, without a word
        _print_error("error: standard output is closed: nothing the command prints could be read (to discard it, "
                     "redirect it to /dev/null)")
        return 2
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    for stream in (sys.stdout, sys.stderr):  # text quoting bad input (a lone surrogate) must still print
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    _stdout_written_whole()
    terminated: list[int] = []
    try:
        with library_bars_on_terminal_only(), _termination_as_interrupt(terminated):
            status = int(args._run(args) or 0)
        # Output still buffered would otherwise be written at exit, where a reader gone meanwhile is Python's
        # "Exception ignored ... BrokenPipeError" and status 120.
        sys.stdout.flush()
        return status
    except KeyboardInterrupt:
        return EXIT_TERMINATED if terminated else 130
    except Exception as exc:
        if raised_within(exc, KeyboardInterrupt):  # (Python < 3.12 wraps one raised in __set_name__)
            return EXIT_TERMINATED if terminated else 130
        if isinstance(exc, BrokenPipeError) and _stdout_closed():
            # The reader of the output stopped (`| head`): nothing more to say, as for any command in a pipe. The
            # output is pointed at /dev/null so that Python's last flush does not fail once more on the way out.
            _silence_stdout()
            return EXIT_BROKEN_PIPE
        message = error_line(exc, args.command)
        if message is None:  # not a failure bad input explains: a bug, whose traceback -v shows
            if args.verbose:
                raise
            message = (f"unexpected {type(exc).__name__}: {_first_line(exc)} (a bug: rerun with -v for the "
                       f"traceback and report it)")
        _print_error(f"error: {plain_printable(message)}")
        return 2


def parse_arguments(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, except that an argument the command does not take is refused by the
    command's own parser, with its usage and the option meant where one is a typo away (argparse refuses it with
    the top-level usage, which lists no option of the command, and no hint: ``--formt``)."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command = _command_parser(parser, args.command)
        options = [o for action in command._actions for o in action.option_strings if o.startswith("--")]
        hints = []
        for arg in unknown:
            name = arg.split("=", 1)[0]
            meant = difflib.get_close_matches(name, options, n=1, cutoff=0.8) if name.startswith("-") else []
            # (one of the command's own options is unrecognized where it stands, after -- or before the command:
            # itself is no option meant)
            if meant and meant[0] != name:
                hints.append(f"{name}: did you mean {meant[0]}?")
        command.error(f"unrecognized arguments: {' '.join(unknown)}" + (f" ({'; '.join(hints)})" if hints else ""))
    return args


def _command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[command]
    return parser


# A command stopped by SIGTERM exits with the status a shell gives a process the signal killed (128 + 15).
EXIT_TERMINATED = 143


@contextlib.contextmanager
def _termination_as_interrupt(terminated: list[int]):
    """SIGTERM (``timeout``, ``kill``, a job runner stopping the command) handled as Ctrl-C is: it raises
    KeyboardInterrupt, so an interrupted run's cleanup runs (export's ``.partial`` file removed, mirror's workers
    ended), where the default action ended the process on the spot and left them. The signal is recorded in
    ``terminated``. A process forked from this one (which inherits the handler) still dies by the signal."""
    me = os.getpid()

    def interrupt(signum, frame):
        if os.getpid() != me:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        terminated.append(signum)
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except (AttributeError, ValueError):  # no SIGTERM here, or main() called from a thread other than the main one
        yield
        return
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


# A command whose output pipe was closed by its reader (`| head`) stops quietly, with the status a shell gives a
# process killed by SIGPIPE (128 + 13), as `cat` or `grep` in the same pipe would.
EXIT_BROKEN_PIPE = 141


def _print_error(line: str) -> None:
    """``line`` on standard error. If that is a pipe its reader closed too (`2>&1 | head`), the exit status alone
    tells the failure: the BrokenPipeError would escape main and end the process with status 1 instead."""
    try:
        print(line, file=sys.stderr)
    except OSError:
        pass


def _stdout_closed() -> bool:
    """True if standard output is a pipe whose reader has gone (poll reports an error on it)."""
    try:
        import select

        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows) or no file descriptor: take it as closed
        return True


class _WholeWrites(io.FileIO):
    """Standard output whose ``write`` writes everything it is given or raises. When the pipe's reader goes while a
    large write waits (`| head` on one long row or report), the system call writes part of it; Python's text and
    buffered layers ignore that short count, so the rest was dropped without an error and the command exited 0."""

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            written = super().write(view[done:])  # a reader gone now is a BrokenPipeError
            if written is None:  # a non-blocking output that is full, as the buffered layer reports it
                raise BlockingIOError(errno.EAGAIN, "standard output would block", done)
            done += written
        return done


def _stdout_written_whole() -> None:
    """Point sys.stdout, when it is a pipe or socket (the outputs that take part of a write), at the same file
    descriptor through _WholeWrites, buffered as it was (PYTHONUNBUFFERED, -u)."""
    stdout = sys.stdout
    try:
        fd = stdout.fileno()
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            return
        stdout.flush()
    except (AttributeError, OSError, ValueError):  # no file descriptor (output captured in memory)
        return
    raw = _WholeWrites(fd, "w", closefd=False)
    unbuffered = isinstance(getattr(stdout, "buffer", None), io.RawIOBase)
    sys.stdout = io.TextIOWrapper(raw if unbuffered else io.BufferedWriter(raw), encoding=stdout.encoding,
                                  errors="backslashreplace", line_buffering=stdout.line_buffering,
                                  write_through=unbuffered)


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        pass


# Failures that bad input or a bad environment explain (a missing or unreadable file, a value datasets or
# pyarrow refuses), shown as one line; anything else is a bug.
INPUT_ERRORS = (OSError, ValueError, DatasetsError)


def error_line(exc: BaseException, command: str | None = None) -> str | None:
    """The one-line message for a failure on bad input: the package's typed error (also when datasets wrapped
    it), else the exception's type and first line; None if nothing in the chain is an input error. ``command``
    (the subcommand that failed) has missing-data advice given in its own arguments."""
    seen, chain = set(), []
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__  # raised "from" it (datasets wraps a generator's error so)
    typed = next((e for e in chain if isinstance(e, _typed_errors())), None)
    if typed is not None:
        return _in_command_terms(typed, command) if isinstance(typed, DataNotFoundError) else str(typed)
    if isinstance(exc, UnknownOptionError) and command is not None:
        # (load()'s note lists its Python keywords, report= and download_mode= among them, which no command takes)
        from .commands import other_options_note

        return f"ValueError: {exc.listing} ({other_options_note(command)})"
    if isinstance(exc, INPUT_ERRORS):
        return f"{type(exc).__name__}: {_first_line(exc)}"
    return None


def _in_command_terms(error: DataNotFoundError, command: str | None) -> str:
    """A missing-data message of load() advises its Python arguments (``data_files=``, ``data_dir=``, several lines
    of calls); a command prints its first line and the error's advice in the command's own arguments
    (``--data-files``, score's ``--gold-data-files``)."""
    message = str(error)
    if command is None or error.command_hint is None:
        return message
    files = "--gold-data-files" if command == "score" else "--data-files"
    return f"{message.splitlines()[0]} {error.command_hint.format(files=files)}"


def _typed_errors() -> tuple[type, ...]:
    """The package's own errors, whose message is the whole story (imported here: mirror and publish are
    loaded only by the commands that use them)."""
    from .mirror.manifest import MirrorError
    from .publish import PublishError

    return ToolUseDataError, DataNotFoundError, MirrorError, PublishError


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else "(no message)"


if __name__ == "__main__":
    sys.exit(main())
