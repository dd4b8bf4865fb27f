"""The one-line errors every script speaks, without torch: Fatal (a bad input or an unreachable resource) and Stopped
(a run stopped by SIGTERM or Ctrl-C, its checkpoint saved), the run that turns them into one line and an exit code
(run_main), a command line answered before torch loads (answer_now), every bad input said at once (preflight), and
what a module says when run as a script (not_a_script)."""

import os
import sys


class Fatal(Exception):
    """A bad input or an unreachable resource: the script prints one line and exits with `code`."""

    def __init__(self, message, code=2):
        super().__init__(message)
        self.code = code


class Stopped(Exception):
    """SIGTERM or Ctrl-C during training: the step was finished and a checkpoint saved; `message` says how to resume."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


def say_error(line):
    """One line on stderr in one write, so that the lines of several processes never run into each other."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def run_main(main, argv=None, end=None):
    """Run `main(argv)`; turn Fatal and Ctrl-C into one line on stderr and a non-zero exit code (a closed stdout, as
    `| head` leaves it: no line, code 141). `end`, when given, runs last whatever happened (part4/run/plan.py's run_cli
    ends the processes there)."""
    try:
        return main(argv) or 0
    except (Fatal, Stopped) as e:
        say_error(f"error: {e}" if isinstance(e, Fatal) else str(e))
        return e.code
    except KeyboardInterrupt:
        say_error("interrupted: no results were written")
        return 130
    except BrokenPipeError:              # the reader of stdout went away (a pipe into head): end as quietly as it did
        quiet_stdout()
        return CLOSED_OUTPUT
    finally:
        if end is not None:
            end()


def answer_now(parse, argv):
    """Run as a script: --help, and a command line that would be refused, answered before torch loads (exit 0 or 2
    with its one line); a good command line returns, to be parsed again by the script's main once torch is there."""
    try:
        parse(argv)
    except Fatal as e:
        say_error(f"error: {e}")
        sys.exit(e.code)


CLOSED_OUTPUT = 141                      # what the shell shows for a command its closed pipe ended (128 + SIGPIPE)


def quiet_stdout():
    """stdout onto /dev/null, so that nothing written later (Python's last flush included) meets the closed pipe."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):    # a stdout without a file descriptor (a test's capture)
        pass


def preflight(problems):
    """Stop with every problem found at once: one line, not one error per run."""
    problems = list(dict.fromkeys(p for p in problems if p))
    if len(problems) == 1:
        raise Fatal(problems[0])
    if problems:
        raise Fatal(f"{len(problems)} inputs cannot be used: " + "; ".join(problems))


def not_a_script(name, run="one of the bert_part4_*.py scripts at the root (each with --help)"):
    """What a module of the suite says when it is run as a script: which script to run instead (exit 2)."""
    say_error(f"{name} is a module, not a script: run {run}")
    return 2
