"""The six scripts' command lines, read from their parsers: every argument is made from a declaration, a flag that
several scripts take is the same flag in each (type, range, choices, default and help) unless each of them says what
else it means there, and a bad value is refused in one line with exit code 2 by every script that takes the flag,
before torch is imported."""

import dataclasses
import glob
import os
import subprocess
import sys

import pytest
from conftest import ROOT

from part4.command_line import fine_tune_settings, script_settings
from part4.command_line.declarations import POSITIVE, Fatal, parser_for, setting, shared

NAMES = sorted(os.path.basename(p)[len("bert_part4_"):-3] for p in glob.glob(os.path.join(ROOT, "bert_part4_*.py")))


def script_parser(name):
    """The parser a script answers with, its command line room's: <name>_parser (part4/command_line)."""
    return getattr(fine_tune_settings if name == "finetune" else script_settings, f"{name}_parser")()


def arguments(parser):
    """{flag or positional name: the argparse action}, help left out."""
    return {(a.option_strings[0] if a.option_strings else a.dest): a for a in parser._actions if a.dest != "help"}


def described(action):
    """What must be the same wherever a flag means the same thing: how its text is read, its range, its choices, how
    many values it takes, its default (the recipe's, where so declared) and its help."""
    f = action.declaration
    return {"type": action.type, "check": f.metadata["check"], "choices": action.choices, "nargs": action.nargs,
            "const": action.const, "default": "the recipe's" if f.metadata["recipe"] else f.default, "help": action.help}


def differences(parsers):
    """What differs between the scripts' declarations of one flag name, as lines: within one meaning (the
    declaration's means; None: the flag's one meaning) anything described; across meanings the type and the range,
    or a declaration that does not say what it means."""
    found = []
    flags = {}
    for script, parser in parsers.items():
        for flag, action in arguments(parser).items():
            flags.setdefault(flag, {})[script] = action
    for flag, taken in sorted(flags.items()):
        if len(taken) < 2:
            continue
        meanings = {}
        for script, action in taken.items():
            meanings.setdefault(action.declaration.metadata["means"], {})[script] = described(action)
        if len(meanings) > 1 and None in meanings:
            found.append(f"{flag}: means another thing in {', '.join(sorted(meanings[None]))} than in the others, "
                         "and does not say so (means=...)")
        for means, scripts in meanings.items():
            first, *rest = sorted(scripts)
            for script in rest:
                for key, value in scripts[script].items():
                    if value != scripts[first][key]:
                        found.append(f"{flag} ({means or 'one meaning'}): {key} {value!r} in {script}, "
                                     f"{scripts[first][key]!r} in {first}")
        for key in ("type", "check"):
            seen = {repr(d[key]) for scripts in meanings.values() for d in scripts.values()}
            if len(seen) > 1:
                found.append(f"{flag}: {key} differs across its meanings: {', '.join(sorted(seen))}")
    return found


PARSERS = {name: script_parser(name) for name in NAMES}


def test_there_are_six_scripts_and_each_argument_is_made_from_a_declaration():
    assert NAMES == ["finetune", "heads", "math", "report", "reproduce", "squad"]
    for name, parser in PARSERS.items():
        undeclared = [flag for flag, action in arguments(parser).items() if not hasattr(action, "declaration")]
        assert undeclared == [], f"{name}: {undeclared}"
        assert all(a.default is None for a in arguments(parser).values()), name   # the declaration's is applied after


def test_a_flag_several_scripts_take_is_the_same_flag_in_each():
    """Read from the parsers: every flag name taken by two or more scripts has the same type, range, choices, default
    and help in each, unless its declarations each say what it means there."""
    several = {flag for flag in set().union(*(arguments(p) for p in PARSERS.values()))
               if sum(flag in arguments(p) for p in PARSERS.values()) > 1}
    assert {"--results-dir", "--device", "--dtype", "--stride", "--model"} <= several     # the check has work to do
    assert all("--results-dir" in arguments(p) for p in PARSERS.values())
    assert differences(PARSERS) == []


@pytest.mark.parametrize("name", NAMES)
def test_help_states_every_default(name):
    """Every flag with a default says it in its help (its declaration's default, or the recipe's)."""
    for flag, action in arguments(PARSERS[name]).items():
        f = action.declaration
        if f.metadata["recipe"] or f.default not in (None, False, ()):
            assert "default" in action.help.lower(), f"{name} {flag}: {action.help}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class One:
    seed: int = shared("seed")
    limit: int = setting(check=POSITIVE, help="the first N")
    only: str = setting(choices=("a", "b"), means="the parts", help="a or b")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Other:
    seed: int = setting(0, check=One.__dataclass_fields__["seed"].metadata["check"], help="another help for the same seed")
    limit: int = setting(help="the first N")
    only: str = setting(choices=("c",), help="c")


def test_the_check_finds_a_flag_declared_otherwise_in_another_script():
    found = differences({"one": parser_for(One, "one"), "other": parser_for(Other, "other")})
    assert found == ["--limit (one meaning): check None in other, Range(low=0, high=None, low_open=True) in one",
                     "--limit: check differs across its meanings: None, Range(low=0, high=None, low_open=True)",
                     "--only: means another thing in other than in the others, and does not say so (means=...)",
                     "--seed (one meaning): help 'another help for the same seed' in other, "
                     f"{One.__dataclass_fields__['seed'].metadata['help']!r} in one"]


def test_a_shared_setting_differs_only_where_it_is_recorded():
    with pytest.raises(TypeError, match="cannot differ"):
        shared("seed", help="another help")


# --- Bad values: one line, exit code 2, from every script that takes the flag, before torch is imported ---

AS_MAIN = ("import runpy, sys\n"
           "name = sys.argv[1]\n"
           "sys.argv = [name] + sys.argv[2:]\n"
           "try:\n"
           "    runpy.run_path(name, run_name='__main__')\n"
           "except SystemExit as e:\n"
           "    print('exit', e.code, 'torch' in sys.modules)\n")

BEFORE = {"finetune": ["squad"]}          # what a script needs before a flag: the fine-tuning's task (one with windows)

BAD = [("--stride", "-1", "must be at least 0"), ("--dtype", "bogus", "invalid choice: 'bogus'"),
       ("--device", "tpu", "invalid choice: 'tpu'"), ("--budget", "bad", "'bad' is not a duration"),
       ("--budget", "0", "--budget 0s: must be positive"), ("--side-by-side", "0", "--side-by-side 0: must be auto or "
                                                                                   "positive"),
       ("--side-by-side", "two", "'two' is neither auto nor a whole number"),
       ("--max-dev-examples", "0", "--max-dev-examples 0: must be positive"),
       ("--max-train-examples", "0", "--max-train-examples 0: must be positive"), ("--seed", "x", "invalid int value"),
       ("--seed", "-1", "--seed -1: must be in [0, 4294967296)"),
       ("--max-len", "0", "--max-len 0: must be positive")]
CASES = [(name, [*BEFORE.get(name, []), flag, value], expected) for flag, value, expected in BAD
         for name in NAMES if flag in arguments(PARSERS[name])]
CASES += [("finetune", ["mrpc", "2e5"], "lr 200000.0: a learning rate must be positive and below 1"),
          ("squad", ["--stride", "384"], "--stride 384: must be below the window length --max-len 384")]


def run_as_script(name, argv):
    out = subprocess.run([sys.executable, "-c", AS_MAIN, f"bert_part4_{name}.py", *argv], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    return out.stdout.strip().splitlines()[-1], out.stderr.strip()


def test_every_bad_value_is_tried_on_every_script_that_takes_its_flag():
    tried = {(name, argv[-2]) for name, argv, _ in CASES}
    assert {("finetune", "--stride"), ("squad", "--stride"), ("finetune", "--dtype"), ("squad", "--dtype"),
            ("reproduce", "--budget"), ("reproduce", "--side-by-side"), ("squad", "--max-dev-examples"),
            ("reproduce", "--max-dev-examples")} <= tried
    assert len({n for n, flag in tried if flag == "--device"}) == 5               # all but the report


@pytest.mark.slow
@pytest.mark.parametrize("name, argv, expected", CASES, ids=lambda x: " ".join(x) if isinstance(x, list) else str(x))
def test_a_bad_value_is_one_line_and_exit_code_2_before_torch(name, argv, expected):
    last, err = run_as_script(name, argv)
    assert last == "exit 2 False", err
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and expected in err, err


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_help_answers_before_torch(name):
    last, err = run_as_script(name, ["--help"])
    assert last == "exit 0 False" and err == ""


@pytest.mark.parametrize("name", NAMES)
def test_in_process_a_script_parses_as_its_command_line(name):
    """main([...]) parses as the command line does: the parse its main calls (part4/command_line/script_settings.py's
    parse_<name>, the fine-tuning's parse) refuses a flag it does not know in one line, and makes its settings once."""
    parse = fine_tune_settings.parse if name == "finetune" else getattr(script_settings, f"parse_{name}")
    with pytest.raises(Fatal, match="^unrecognized arguments: --no-such-flag \\(see --help\\)$"):
        parse([*BEFORE.get(name, []), "--no-such-flag"])
    settings = parse([*BEFORE.get(name, []), "--results-dir", "elsewhere"])
    assert dataclasses.is_dataclass(settings) and settings.results_dir == "elsewhere"


@pytest.mark.parametrize("device, bf16, said, dtype", [
    ("cuda", True, "bf16 on CUDA", "bf16"), ("cuda", False, "fp16 on Apple MPS or a card without bf16", "fp16"),
    ("mps", False, "fp16 on Apple MPS", "fp16"), ("cpu", False, "fp32 on the CPU", None)])
def test_the_squad_help_says_what_its_window_and_auto_dtype_are(device, bf16, said, dtype, monkeypatch):
    """The SQuAD script's --help says what its two flags shared with the fine-tune are there: the window's length is the
    one it parses to, and --dtype auto is what autocast_dtype gives for an evaluation on each device."""
    import torch

    from part4.models.loading import autocast_dtype
    text = " ".join(script_settings.squad_parser().format_help().split())
    window = script_settings.parse_squad([]).max_len
    assert f"--max-len is a window's length (default {window}," in text
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    assert said in text and autocast_dtype(torch.device(device), "auto", inference=True) == (
        dtype and getattr(torch, {"bf16": "bfloat16", "fp16": "float16"}[dtype]))
