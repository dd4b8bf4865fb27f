"""A command line's ground, without torch: the one-line errors every script speaks, and a setting declared once.

The errors: Fatal (a bad input or an unreachable resource) and Stopped (a run stopped by SIGTERM or Ctrl-C, its
checkpoint saved), the run that turns them into one line and an exit code (run_main), a command line answered before
torch loads (answer_now), every bad input said at once (preflight), and what a module says when run as a script
(not_a_script).

The declarations: a setting's flag, type, default, help, range or choices and where a results file records it
(setting), and what is made from a dataclass of such declarations: the parser and its arguments (parser_for), the
values given, checked, or their defaults (given_or_default), the settings made once (settings_from), the recorded
settings and their defaults; the parser whose usage mistakes are one line, durations (90s, 10m, 1h); and the settings
several scripts take, each declared once here and used by every script that takes it (shared): the model, the seed,
the device, the results folder, the autocast dtype, SQuAD's windows, the quick pass's cuts, and the check across two
of them (a window longer than its overlap)."""

import argparse
import os
import re
import signal
import sys
from dataclasses import dataclass, field, fields

from part4.paper.article import ARTICLE_MODEL
from part4.paper.recipe import RECIPES, STRIDE, lr_tag

# --- The one-line errors every script speaks, and the run that turns them into a line and an exit code ---

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
    """One line on stderr in one write, so that the lines of several processes never run into each other; a progress
    bar still drawn there (a run stopped inside its loop, Ctrl-C in SQuAD's scoring) is cleared first, so that the line
    never runs on from it."""
    # tqdm imported on the way out only: --help and a good command line never load it
    from tqdm import tqdm

    for bar in list(getattr(tqdm, "_instances", ())):       # cleared, not drawn again: the command ends with this line
        bar.clear()
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def run_main(main, argv=None):
    """Run `main(argv)`; turn Fatal and Ctrl-C into one line on stderr and a non-zero exit code (a closed stdout, as
    `| head` leaves it: no line, code 141). The report and the reproduce script, which import no torch, run in it; the
    scripts that load torch run in part4/models/loading.py's run_cli, which also leaves the processes' group last."""
    if signal.getsignal(signal.SIGINT) is interrupted_before_main:       # main runs: Ctrl-C is KeyboardInterrupt again
        signal.signal(signal.SIGINT, signal.default_int_handler)
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


def answer_now(parse, argv):
    """Run as a script: --help, and a command line that would be refused, answered before torch loads (exit 0 or 2
    with its one line); a good command line returns, to be parsed again by the script's main once torch is there.
    Until main runs (run_main), Ctrl-C, which would stop the imports with a traceback, is one line and exit 130."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:     # not where the shell ignores it (cmd &)
        signal.signal(signal.SIGINT, interrupted_before_main)
    try:
        parse(argv)
    except Fatal as e:
        say_error(f"error: {e}")
        sys.exit(e.code)


def interrupted_before_main(signum, frame):
    """Ctrl-C while a script imports what its main needs: one line, exit 130, nothing was written yet."""
    say_error("interrupted: no results were written")
    raise SystemExit(130)


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


# --- The parser whose usage mistakes are one line ---

class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (and exit code 2) like every other bad input."""

    def error(self, message):
        raise Fatal(f"{message} (see --help)")

    def parse_known_args(self, args=None, namespace=None):
        # '--checkpoint-every -5m' read as '--checkpoint-every=-5m': a word that starts with a dash after a flag that
        # takes a value is that value, unless it is one of the flags (argparse would take it for a flag it does not
        # know and say "expected one argument", not what is wrong with the value)
        takes_value = {s for a in self._actions if a.option_strings and a.nargs is None for s in a.option_strings}
        joined = []
        for word in sys.argv[1:] if args is None else args:
            if joined and joined[-1] in takes_value and word.startswith("-") and word != "--" \
                    and word.split("=")[0] not in self._option_string_actions:
                joined[-1] = f"{joined[-1]}={word}"
            else:
                joined.append(word)
        return super().parse_known_args(joined, namespace)


# --- A setting declared once: its flag, type, default, help, range or choices, and where it is recorded ---

@dataclass(frozen=True)
class Range:
    """Where a number must lie: at least low (above it, when low_open), below high."""
    low: float = None
    high: float = None
    low_open: bool = False

    def __call__(self, value):
        """None when value lies in the range, else what it must be."""
        if (self.low is None or value > self.low or (value == self.low and not self.low_open)) and \
                (self.high is None or value < self.high):
            return None
        if self.high is not None:
            return f"must be in {'(' if self.low_open else '['}{self.low}, {self.high})"
        return "must be positive" if self.low == 0 and self.low_open else f"must be at least {self.low}"


POSITIVE = Range(low=0, low_open=True)


DURATION_UNITS = {"h": 3600, "m": 60, "s": 1}


def duration(text):
    """A length of wall time as a flag gives it ('90s', '10m', '1.5h', '1h30m'; a bare number is seconds), in seconds:
    what argparse reads such a flag as. A word that is not one is refused in one line; a sign is read ('-5m' is
    -300), so that the setting's range says what a duration of zero or less is."""
    number, given = r"(?:\d+(?:\.\d*)?|\.\d+)", str(text).strip().lower()
    sign = -1.0 if given.startswith("-") else 1.0
    body = given[1:].strip() if given[:1] in "+-" else given
    if re.fullmatch(number, body):
        return sign * float(body)
    if not re.fullmatch(rf"(?:{number}\s*[hms]\s*)+", body):
        raise argparse.ArgumentTypeError(f"'{text}' is not a duration (e.g. 90s, 10m, 1h, 1h30m)")
    return sign * sum(float(v) * DURATION_UNITS[unit] for v, unit in re.findall(rf"({number})\s*([hms])", body))


def auto_or_whole(text):
    """'auto', or a whole number ('4'): what argparse reads a flag that the device may size (its check says which
    numbers may be)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is neither auto nor a whole number") from None


def auto_or_positive(value):
    """None when value is 'auto' or a positive number, else what it must be."""
    return None if value == "auto" or value > 0 else "must be auto or positive"


def shown_duration(seconds):
    """600.0 -> '10m', 90.0 -> '90s', 7200.0 -> '2h', 0.25 -> '0.25s': a duration as a flag gives it, in the largest
    unit that holds it whole."""
    unit = next(u for u, size in DURATION_UNITS.items() if seconds % size == 0 and abs(seconds) >= size or u == "s")
    return f"{seconds / DURATION_UNITS[unit]:g}{unit}"


def readable_time(seconds):
    """Seconds as a reader wants them: '40 s', '12 min', '3.4 h', '2.1 days'."""
    if seconds is None:
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 48 * 3600 else f"{seconds / 86400:.1f} days"


RUN, TABLE = "run", "table"     # where a results file records a setting: with each run's settings, with a table's


DECLARATION = {           # what a setting's declaration may say beside its default and help, and what it says if not
    "flag": True,         # its flag: --<name with dashes> (True: one name from the flag to the results key), "positional",
    #                       "optional positional" (a positional argument that may be left out), or None (set by the command)
    "type": None,         # what the flag's text is read as (None: the field's own type, int, float or str)
    "choices": None,      # the values it may take, or {word: value}: the flag's words and what they stand for
    "check": None,        # a function of a given value: None when it may be, else what it must be (a Range)
    "recipe": False,      # its default is the recipe's for the task (part4/paper/recipe.py), not the declared one
    "record": (),         # where a results file records it: RUN (what decides a run's numbers: a result or checkpoint of
    #                       other settings is never reused), TABLE (what decides a table's)
    "unless_default": (),  # the places of record where it is recorded only when it is not its default
    "path": False,        # a local path, recorded portably
    "cuts": False,        # a run cut by it is not the paper's (its log and table say so)
    "metavar": None,      # the flag's value as --help names it
    "switch": False,      # a flag that takes no value: given, the setting is True
    "repeat": False,      # the flag may be given more than once: the setting is every value given
    "bare": None,         # the value of the flag given without one (its value is optional), None: a value is needed
    "means": None,        # what the flag means here, where another script's flag of the same name means another thing
    #                       (tests/test_command_lines.py: one flag, one meaning, one declaration, unless each says)
}


def setting(default=None, *, help, **declared):
    """One field of a command's settings, declared once (as Hugging Face's TrainingArguments declares its fields):
    its default (when the flag is not given), the help --help prints, and what DECLARATION lists.

    Every setting is recorded with the command line (a results file's run.config, by its field's name); record names
    where else. A setting added later must default to what the command did before it existed: results recorded without it
    then read as that default (recorded_defaults) and stay valid; recorded unless_default, a result at the default
    is written as before it existed."""
    unknown = sorted(set(declared) - set(DECLARATION))
    if unknown:
        raise TypeError(f"setting() does not declare {', '.join(unknown)}: it declares {', '.join(DECLARATION)}")
    return field(default=default, metadata={"help": help, **DECLARATION, **declared})


def flag_name(name):
    """results_dir -> --results-dir"""
    return "--" + name.replace("_", "-")


def parser_for(settings_class, description, epilog=None):
    """A script's parser, made from the declarations of its settings: one argument per field, in their order. Every
    default is None, so that a flag not given is told from one given with its default value; the declaration's
    default is applied after (given_or_default). Each argument keeps its declaration (action.declaration), for what
    reads the parser."""
    parser = ArgumentParser(description=description, epilog=epilog)
    for f in fields(settings_class):
        m, kind = f.metadata, f.metadata.get("flag")
        if kind is None:                 # set by the command itself (the command line as given), not by a flag
            continue
        words = m["choices"]
        options = {"help": m["help"], "metavar": m["metavar"], "default": None}
        if m["switch"]:
            options |= {"action": "store_const", "const": True}
        else:
            options |= {"type": m["type"] or (f.type if f.type in (int, float) else str),
                        "choices": list(words) if words is not None else None}
        if m["repeat"]:
            options["action"] = "append"
        if m["bare"] is not None:
            options |= {"nargs": "?", "const": m["bare"]}
        if kind == "positional":
            action = parser.add_argument(f.name, **options)
        elif kind == "optional positional":
            action = parser.add_argument(f.name, nargs="?", **options)
        else:
            action = parser.add_argument(flag_name(f.name), **options)
        action.declaration = f
    return parser


def settings_from(parser, settings_class, argv, recipe=None):
    """The command line as settings, made once, by keyword: each flag as given (checked against its declaration),
    else its declared default (the recipe's, where the declaration says so)."""
    return settings_class(**given_or_default(vars(parser.parse_args(argv)), settings_class, recipe))


def given_or_default(given, settings_class, recipe):
    """{field: value} of every field set by a flag, in their order: its flag as given ({name: value as parsed, None
    where not given}; a word as the value it stands for), checked against its declaration's check and refused in one
    line ('--batch-size 0: must be positive'; a positional argument by its name: 'lr 200000.0: ...'), else its
    declared default (the recipe's, where the declaration says so)."""
    values = {}
    for f in fields(settings_class):
        m = f.metadata
        if m.get("flag") is None:        # set by the command itself, not by a flag
            continue
        value = given[f.name]
        if value is None:
            values[f.name] = getattr(recipe, f.name) if m["recipe"] else f.default
            continue
        if m["check"] is not None and m["check"](value) is not None:
            shown = shown_duration(value) if m["type"] is duration else value
            name = f.name if str(m["flag"]).endswith("positional") else flag_name(f.name)
            raise Fatal(f"{name} {shown}: {m['check'](value)}")
        values[f.name] = m["choices"][value] if isinstance(m["choices"], dict) else value
    return values


def recorded_in(settings, place, path=None):
    """{name: value} of the settings declared as recorded in place (RUN or TABLE), each under its field's name, a word
    for the value it stands for (group_by_length "auto"), a path as path() writes it; one recorded there unless
    default is left out at its default."""
    out = {}
    for f in fields(settings):
        value, m = getattr(settings, f.name), f.metadata
        if place not in m.get("record", ()) or (place in m["unless_default"] and value == f.default):
            continue
        if isinstance(m["choices"], dict):
            value = {v: k for k, v in m["choices"].items()}[value]
        elif m["path"] and path is not None:
            value = path(value)
        out[f.name] = value
    return out


def settings_diff(saved, ours, ignore=()):
    """'lr 3e-05 -> 2e-05; seed 0 -> 1': what differs between recorded settings and ours ('' when nothing does)."""
    saved = saved or {}
    return "; ".join(f"{k} {saved.get(k)!r} -> {v!r}" for k, v in ours.items() if k not in ignore and saved.get(k) != v)


def recorded_defaults(settings_class, place):
    """{name: its declared default as recorded} of the settings recorded in place whose default is not the recipe's:
    what a results file that does not record one of them (written before it was declared) ran with: the settings of a
    command given no flag, as recorded. A setting recorded there only when it is not its default is left out: absent
    is how its default is written."""
    recipe = {f.name for f in fields(settings_class) if f.metadata.get("recipe")}
    return {name: value for name, value in recorded_in(settings_class(), place).items() if name not in recipe}


# --- The settings several scripts take, each declared once here and taken by every script that takes it (shared) ---

FAMILY_NAMES = {"cola": "GLUE", "squad": "SQuAD v1.1", "squad_v2": "SQuAD v2.0", "swag": "SWAG"}   # a task of each
# recipe, by the name --help gives it (cola: any GLUE task, whose recipes are one)
# Each setting the recipe sets per head family (RECIPES), as --help says it: PAPER_DEFAULTS["batch_size"] is
# 'GLUE 32, SQuAD v1.1 32, SQuAD v2.0 48, SWAG 16'; learning rates as the article writes them (2e-5).
PAPER_DEFAULTS = {name: ", ".join(f"{label} {shown(getattr(RECIPES[task], name))}" for task, label in FAMILY_NAMES.items())
                  for name, shown in (("lr", lr_tag), ("batch_size", str), ("epochs", str), ("max_len", str))}

DEVICES = ("auto", "cuda", "mps", "cpu")
DTYPES = ("auto", "fp32", "bf16", "fp16")


SHARED = {           # {name: its declaration}: what setting() takes, the same in every script that takes it
    "model": dict(default=ARTICLE_MODEL,
                  help=f"pre-trained BERT: Hub id or local folder (default and article: {ARTICLE_MODEL})"),
    "seed": dict(default=0, check=Range(0, 2 ** 32),
                 help="the one fixed seed: the new output layers' random weights, and in fine-tuning the "
                      "batches' order and dropout (default 0)"),
    "device": dict(default="auto", choices=DEVICES, help="auto (cuda, then mps, then cpu), cuda, mps or cpu (default: auto)"),
    "results_dir": dict(default="results", help="the results folder: where each script writes its logs, JSON and plots, "
                                                "and the report reads them and writes REPRODUCTION.md (default: results/)"),
    "dtype": dict(default="auto", choices=DTYPES, means="the autocast of a fine-tune's or a dev set's forward passes",
                  # resolved on the device: part4/models/loading.py's autocast_dtype
                  help="autocast: auto (the default: bf16 on CUDA, or on a card without bf16 fp16 for SQuAD's evaluation "
                       "and fp32 for a fine-tune; on MPS fp16 for SQuAD's evaluation, fp32 for a fine-tune, its dev "
                       "evaluations too; fp32 elsewhere), "
                       "fp32, bf16, or fp16 for evaluation only (training in fp16 needs loss scaling, which this suite "
                       "does not do)"),
    "dtype_fp32": dict(default="fp32", choices=("fp32", "bf16"), means="the autocast of the hand checks' forward passes",
                       # the heads' and math's: their checks are fp32's
                       help="fp32 (the default, on every device: the article's printed digits, and the hand-vs-library "
                            "checks at fp32's tolerance) or bf16 autocast (faster where the device computes bf16 "
                            "natively: a GPU from Ampere on, a CPU with AMX or AVX-512-BF16; every number then bf16's, "
                            "the checks at bf16's tolerance)"),
    "max_len": dict(recipe=True, check=POSITIVE,
                    help=f"longest input in tokens (default: {PAPER_DEFAULTS['max_len']}: run_classifier.py's inputs, "
                         "run_squad.py's windows)"),
    "stride": dict(default=STRIDE, check=Range(0),
                   help=f"SQuAD: tokens two consecutive windows share (default {STRIDE}, the article's; run_squad.py's "
                        "doc_stride is the same number but the step from one window to the next, so its windows "
                        "differ)"),
    "max_dev_examples": dict(check=POSITIVE, cuts=True, metavar="N",
                             help="only the first N examples of each dev set, in file order (SQuAD: questions)"),
    "max_train_examples": dict(check=POSITIVE, cuts=True, metavar="N",
                               help="only the first N training examples of each fine-tune (SQuAD: questions): a cut "
                                    "run, which its log and the report mark"),
}


def shared(name, **where):
    """The declaration of a setting several scripts take, as SHARED holds it; where: only what a script's own results
    file adds to it (record, unless_default, path), never its type, default, help, range or choices."""
    unknown = sorted(set(where) - {"record", "unless_default", "path"})
    if unknown:
        raise TypeError(f"shared('{name}') takes the declaration as it is: {', '.join(unknown)} cannot differ")
    return setting(**SHARED[name], **where)


def check_windows(max_len, stride):
    """SQuAD's windows: the stride (the tokens two windows share, at least 0 by its declaration) must be below the
    window length."""
    if not 0 <= stride < max_len:
        raise Fatal(f"--stride {stride}: must be below the window length --max-len {max_len} (and at least 0)")
