"""What every script's command line shares, without torch (so that --help and a refused flag answer at once): the
one-line errors (Fatal, Stopped) and the run that turns them into one line and an exit code, the parser that raises
them, the flags every script takes, and the check of numbers that must be positive."""

import argparse
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


def run_cli(main, argv=None, end=None):
    """Run `main(argv)`; turn Fatal and Ctrl-C into one line on stderr and a non-zero exit code. `end`, when given,
    runs last whatever happened (part4/common.py's run_cli ends the processes there)."""
    try:
        return main(argv) or 0
    except (Fatal, Stopped) as e:
        say_error(f"error: {e}" if isinstance(e, Fatal) else str(e))
        return e.code
    except KeyboardInterrupt:
        say_error("interrupted: no results were written")
        return 130
    finally:
        if end is not None:
            end()


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (and exit code 2) like every other bad input."""

    def error(self, message):
        raise Fatal(f"{message} (see --help)")


def add_common_flags(parser):
    parser.add_argument("--device", default="auto", help="auto (cuda, then mps, then cpu), cuda, mps or cpu (default: auto)")
    parser.add_argument("--results-dir", default="results", help="where the logs, JSON and plots go (default: results/)")


def check_positive(values):
    """{flag: value}: each that is given must be a positive number."""
    for flag, value in values.items():
        if value is not None and value <= 0:
            raise Fatal(f"{flag} {value}: must be positive")


if __name__ == "__main__":
    say_error("part4/flags.py is a module, not a script: run one of the bert_part4_*.py scripts at the root")
    sys.exit(2)
