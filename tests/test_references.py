"""Every reference is true: each repository path, module (part4.x.y), `module.function` and "file.py's function" that a
docstring, a comment or a page of the docs names exists in the tree, where it says. Paths are read from the repository
root (a page's links also from its own folder); a ../shared/ path is checked when ../shared is here; a results/ file is
checked when it is committed, else by the pattern of what the runs write. A name a page writes as code (`name`) is one
the code uses, and in a row of docs/layout.md one its file (or a file the row names) defines or imports; a sentence that
says only some files read a command line names every room of part4 that reads one. The allow-lists below are short,
each with its reason."""

import ast
import glob
import io
import os
import re
import tokenize

import pytest
from conftest import ROOT

SHARED = os.path.join(ROOT, "..", "shared")
# What lies beside the article in ../shared/article (its inputs, its reference logs), by name: named without its folder
# it reads as a file of the checkout.
BESIDE_THE_ARTICLE = {os.path.basename(p): os.path.relpath(p, os.path.join(SHARED, ".."))
                      for p in glob.glob(os.path.join(SHARED, "article", "*"))}

# Files of other projects, named as the source of a setting: Google's released BERT code, SQuAD's official scripts.
ELSEWHERE = {"run_squad.py", "run_classifier.py", "optimization.py", "evaluate-v1.1.py", "evaluate-v2.0.py"}
# What the runs write under results/ (not committed): each script's own files, the SQuAD prediction files, the
# reproduce script's log and calibration, the stand-in runs, bench/window_coverage.py's folders.
RUN_OUTPUTS = re.compile(r"results/(part4_|squad_v[12]_|reproduce|stand-in|window_coverage/|[ab]/)")
# Libraries whose names before a dot name their own functions (torch.load, matplotlib.pyplot), not a module of ours.
LIBRARIES = {"torch", "matplotlib"}



# --- The tree: its modules, the names each defines, its folders ---

def python_files():
    return sorted(glob.glob(os.path.join(ROOT, "bert_part4_*.py")) + glob.glob(os.path.join(ROOT, "bench", "*.py"))
                  + glob.glob(os.path.join(ROOT, "part4", "**", "*.py"), recursive=True))


def pages():
    return [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))


def parsed(path):
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read())


def defined(tree):
    """Every name a module defines itself (not those it imports): functions, classes and their members, assignments,
    dataclass fields, attributes set on an object, parameters."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            names.add(node.id if isinstance(node, ast.Name) else node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def imported(tree):
    return {(a.asname or a.name).split(".")[0] for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
            for a in node.names}


def members(tree):
    """The names defined inside classes (methods, fields) and set as attributes of an object."""
    inside = {n.name if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) else n.target.id
              for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for n in c.body
              if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
              or isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    return inside | {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}


def variables(tree):
    """The names the code binds as a variable or a parameter (run, data, models, ...)."""
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} | {
        n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}


class Tree:
    """The modules of part4/, the scripts and bench/: by dotted name, by file name, by the name a reader calls them
    (`squad_spans`, `bert_part4_squad`), with what each defines; part4's folders."""

    def __init__(self, root):
        self.root = root
        self.paths = {os.path.relpath(p, root) for p in python_files()}
        self.by_stem = {}
        for path in sorted(self.paths):
            stem = os.path.splitext(os.path.basename(path))[0]
            if stem != "__init__":
                self.by_stem.setdefault(stem, []).append(path)
        self.entries = {name for top, dirs, files in os.walk(root) if ".git" not in top.split(os.sep)
                        for name in dirs + files}                   # every file and folder of the tree, by name
        self.folders = {os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(root, "part4", "*", "__init__.py"))}
        trees = {path: parsed(os.path.join(root, path)) for path in self.paths}
        self.names = {path: defined(t) for path, t in trees.items()}
        self.has = {path: self.names[path] | imported(t) for path, t in trees.items()}
        self.members = set().union(*map(members, trees.values()))
        self.variables = set().union(*map(variables, trees.values()))
        self.homes = {}                                             # a function or class -> the modules defining it
        for path, t in trees.items():
            for node in t.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    self.homes.setdefault(node.name, set()).add(path)

    def module(self, dotted):
        """part4.a.b -> its file, or None."""
        base = os.path.join(*dotted.split("."))
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if candidate.replace(os.sep, "/") in {p.replace(os.sep, "/") for p in self.paths}:
                return candidate
        return None


# --- The prose: docstrings and comments of the code, the pages whole ---

def prose(path):
    """A file's docstrings and comments (a page: its text)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".py"):
        parts = [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                parts.append(ast.get_docstring(node, clean=False) or "")
        text = "\n".join(parts)
    return text


PATH = re.compile(r"(?<![\w/.@-])((?:\.\./|\.ci/)?[\w.<>*-]+/[\w./*<>-]*[\w*>/]|[\w-]+(?:\.[\w-]+)*\.(?:py|md))(?![\w/])")
DOTTED = re.compile(r"(?<![\w./-])([a-z_][a-z0-9_]*(?:\.[A-Za-z_]\w*)+)(?![\w-])")
POSSESSIVE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.py)'s (`?)([A-Za-z_]\w*)")


def path_untrue(tree, ref, where):
    """Why a path is not in the tree (None when it is, or when it is not a path of ours)."""
    ref = ref.rstrip("/")
    pattern = re.sub(r"<[^>]*>?|\{[^}]*\}?", "*", ref)
    here = os.path.dirname(os.path.join(tree.root, where))
    top = ref.split("/")[0]
    if top in BESIDE_THE_ARTICLE and top not in tree.entries:
        return f"{ref}: in ../{BESIDE_THE_ARTICLE[top]}, not in the checkout"
    if "/" not in ref:                                          # a bare file name: somewhere in the tree, or elsewhere
        if ref in ELSEWHERE or ref in tree.entries:
            return None
        return f"{ref}: no such file in the tree"
    if top == "..":
        shared = ref.split("/")[1] == "shared"
        if not shared and not os.path.exists(os.path.join(here, ref)):
            return f"{ref}: outside the tree"
        if shared and os.path.isdir(SHARED) and not glob.glob(os.path.join(tree.root, pattern)):
            return f"{ref}: not in ../shared"
        return None
    ours = top in {"part4", "docs", "tests", "bench", "results", ".ci"} or ref.endswith((".py", ".md"))
    if not ours or glob.glob(os.path.join(tree.root, pattern)) or glob.glob(os.path.join(here, pattern)):
        return None
    if top == "results" and RUN_OUTPUTS.match(ref):
        return None
    return f"{ref}: no such path"


def dotted_untrue(tree, ref):
    """Why a dotted name (part4.x.y, folder.module, module.name, or a function named through a module that does not
    hold it) is not true; None when it is, or when it is not a reference to our code."""
    parts = ref.split(".")
    if parts[-1] == "py" or parts[0] in LIBRARIES:              # a file's name (the path check reads it), a library
        return None
    if parts[0] == "part4":
        for k in range(len(parts), 1, -1):
            path = tree.module(".".join(parts[:k]))
            if path:
                rest = parts[k:]
                if rest and rest[0] not in tree.names[path]:
                    if path.endswith("__init__.py"):
                        return f"{ref}: no such module"
                    return f"{ref}: {rest[0]} is not defined in {path}"
                return None
        return f"{ref}: no such module"
    if parts[0] in tree.folders:
        path = tree.module(f"part4.{parts[0]}.{parts[1]}")
        if path is not None:
            return None if len(parts) == 2 or parts[2] in tree.names[path] else f"{ref}: {parts[2]} is not in {path}"
        # a folder also named as a variable (run, data, ...): a module only where the second name is one's
        if parts[0] not in tree.variables or parts[1] in tree.by_stem and parts[1] not in tree.members:
            return f"{ref}: part4/{parts[0]}/ has no module {parts[1]}"
        return None
    if parts[0] in tree.by_stem:
        homes = tree.by_stem[parts[0]]
        if any(parts[1] in tree.names[h] for h in homes):
            return None
        return f"{ref}: {parts[1]} is not defined in {' or '.join(homes)}"
    if parts[1] in tree.homes and parts[1] not in tree.members:     # a function of ours, through no module of ours
        return f"{ref}: no module {parts[0]}; {parts[1]} is in {' and '.join(sorted(tree.homes[parts[1]]))}"
    return None


def possessive_untrue(tree, file, quoted, name):
    """'file.py's name': the file exists (path_untrue) and, where name reads as code (backticked, with an underscore,
    CamelCase, or a function of the tree), the file has it (defines or imports it: the script's Settings)."""
    if os.path.basename(file) in ELSEWHERE:
        return None
    homes = [file] if "/" in file else [p for p in tree.paths if os.path.basename(p) == file]
    if not homes:
        return None                                             # the path check says so
    code = quoted or "_" in name or re.match(r"[A-Z][a-z]+[A-Z]", name) or name in tree.homes
    if code and not any(h in tree.has and name in tree.has[h] for h in homes):
        return f"{file}'s {name}: not in {' or '.join(homes)}"
    return None


def untrue(tree, text, where):
    """Every reference of a text that is not true, as 'where: why' (a path broken over two lines read joined)."""
    text = re.sub(r"/\n[ \t]*(?:#[ \t]*)?", "/", text)
    found = [path_untrue(tree, m.group(1), where) for m in PATH.finditer(text) if not m.group(1).startswith("http")]
    found += [dotted_untrue(tree, m.group(1)) for m in DOTTED.finditer(text)]
    found += [possessive_untrue(tree, m.group(1), m.group(2), m.group(3)) for m in POSSESSIVE.finditer(text)]
    return sorted({f"{where}: {why}" for why in found if why})


@pytest.fixture(scope="module")
def tree():
    return Tree(ROOT)


def test_every_reference_of_the_docstrings_comments_and_docs_is_true(tree):
    found = {line for path in python_files() + pages() for line in untrue(tree, prose(path), os.path.relpath(path, ROOT))}
    assert sorted(found) == []


def test_a_made_up_reference_fails_and_a_true_one_passes(tree):
    made_up = ("Padded as training batches are (runs.collate); see part4/tasks/spans.py, part4.tasks.windows,\n"
               "part4/\n    stand_in.py, bert_part4_squad.py's `read_glue`, command_line.parsers, command.prepare_all,\n"
               "docs/nothing.md, missing_script.py and bert_part4_squad.predict.")
    beside = ["reference_logs/part4_math_stdout.txt: in ../shared/article/reference_logs, not in the checkout",
              "INPUTS.md: in ../shared/article/INPUTS.md, not in the checkout"] if BESIDE_THE_ARTICLE else []
    made_up += " The inputs (INPUTS.md), in the order of reference_logs/part4_math_stdout.txt."
    assert untrue(tree, made_up, "README.md") == sorted(f"README.md: {why}" for why in beside + [
        "runs.collate: no module runs; collate is in part4/data/batches.py",
        "part4/tasks/spans.py: no such path",
        "part4.tasks.windows: no such module",
        "part4/stand_in.py: no such path",
        "bert_part4_squad.py's read_glue: not in bert_part4_squad.py",
        "command_line.parsers: part4/command_line/ has no module parsers",
        "command.prepare_all: prepare_all is not defined in part4/run/command.py",
        "docs/nothing.md: no such path",
        "missing_script.py: no such file in the tree",
        "bert_part4_squad.predict: predict is not defined in bert_part4_squad.py"])
    true = ("part4/tasks/squad_spans.py's `demo_one`, part4.tasks.squad_metric, paper.article, squad_spans.predict,\n"
            "run_squad.py's doc_stride, results/part4_squad.json, results/<name>.log, enc.sequence_ids, torch.float32,\n"
            "config.json, [the layout](layout.md), bert_part4_math.py's TOY_START, ../shared/article/INPUTS.md.")
    assert untrue(tree, true, os.path.join("docs", "page.md")) == []


# --- A name the pages write as code is the code's: a function or class named in docs/ exists under that name ---

# Names of other projects that the pages write as code: evaluate-v2.0.py's output fields (our code makes them as
# f"best_{name}"), run_squad.py's flag, arguments of Hugging Face's forward that packing does not compute, and
# DistilBERT's LayerNorm weights.
OTHER_PROJECTS_NAMES = {"best_f1", "best_f1_thresh", "doc_stride", "output_attentions", "head_mask", "sa_layer_norm"}
CODE_NAME = re.compile(r"(?<![\w.-]\.py's )(?<!\.py`'s )`([A-Za-z_]\w*)(?:\(\))?`")


def reads_as_code(name):
    """A function's or a variable's name (an underscore, not a constant's capitals) or a class's (CamelCase)."""
    return "_" in name and not name.isupper() or bool(re.match(r"[A-Z][a-z]+[A-Z]", name))


def code_words(paths):
    """Every name the code of these files uses (defined, imported, read, an attribute, a keyword argument) and every
    string of it that could be one (a JSON field, a flag's dest)."""
    words = set()
    for path in paths:
        for node in ast.walk(parsed(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                words.add(node.name)
            elif isinstance(node, ast.Name):
                words.add(node.id)
            elif isinstance(node, ast.Attribute):
                words.add(node.attr)
            elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:
                words.add(node.arg)
            elif isinstance(node, ast.alias):
                words.add((node.asname or node.name).split(".")[-1])
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                words.add(node.value)
    return words


@pytest.fixture(scope="module")
def words():
    return code_words(python_files() + sorted(glob.glob(os.path.join(ROOT, "tests", "*.py"))))


def names_untrue(words, text, where):
    """Every name a page writes as code (`name` or `name()`, not after a file's possessive, which the check above
    reads) that no code of the tree or its tests uses, as 'where: why'."""
    return sorted({f"{where}: `{m.group(1)}`: no such name in the code" for m in CODE_NAME.finditer(text)
                   if reads_as_code(m.group(1)) and m.group(1) not in words | OTHER_PROJECTS_NAMES})


def layout_rows_untrue(tree, text):
    """docs/layout.md's tables: every name a row writes as code is defined or imported by the row's file, or by a file
    the row names (a function moved or renamed leaves its old name there)."""
    found = []
    for row in re.finditer(r"^\| `([^`]+)` \| (.*) \| [^|]+ \|$", text, re.M):
        path, cell = row.group(1), row.group(2)
        files = {path} | {m.group(1) for m in PATH.finditer(cell) if m.group(1) in tree.paths}
        found += [f"{path}: `{m.group(1)}` is not in {' or '.join(sorted(files))}" for m in CODE_NAME.finditer(cell)
                  if reads_as_code(m.group(1)) and not any(m.group(1) in tree.has.get(f, ()) for f in files)]
    return sorted(set(found))


def test_every_name_the_pages_write_as_code_is_the_codes(words):
    found = [line for path in pages() for line in names_untrue(words, prose(path), os.path.relpath(path, ROOT))]
    assert found == []


def test_every_name_a_row_of_the_layout_writes_as_code_is_its_files(tree):
    assert layout_rows_untrue(tree, prose(os.path.join(ROOT, "docs", "layout.md"))) == []


def test_a_made_up_name_fails_and_a_true_one_passes(tree, words):
    made_up = ("| `part4/tasks/squad_metric.py` | EM and F1, the no-answer threshold (`find_best_thresh`), the spans "
               "(`n_best_span_search`) | (none) |\n"
               "the batch, the loss and `train_step` are unchanged\n")
    assert names_untrue(words, made_up, "docs/page.md") == ["docs/page.md: `find_best_thresh`: no such name in the code",
                                                            "docs/page.md: `train_step`: no such name in the code"]
    assert layout_rows_untrue(tree, made_up) == [
        "part4/tasks/squad_metric.py: `find_best_thresh` is not in part4/tasks/squad_metric.py",
        "part4/tasks/squad_metric.py: `n_best_span_search` is not in part4/tasks/squad_metric.py"]
    true = ("| `part4/tasks/squad_metric.py` | the no-answer threshold (`best_threshold`: `evaluate-v2.0.py`'s "
            "`find_best_thresh`), beside `part4/tasks/squad_spans.py`'s (`official_best_tau`, `n_best_span_search`) | "
            "(none) |\nthe fields `best_f1` and `is_impossible`, `Classification`, `run_squad.py`'s `doc_stride`, `auto`\n")
    assert names_untrue(words, true, "docs/page.md") == [] and layout_rows_untrue(tree, true) == []


# --- Who reads a command line: a sentence that says only some files do names every room that does ---

def command_line_rooms(root):
    """The rooms of part4 that read a command line of their own: those whose `if __name__ == "__main__":` block runs
    their main (the scripts read theirs too, each through part4/command_line)."""
    rooms = []
    for path in sorted(glob.glob(os.path.join(root, "part4", "**", "*.py"), recursive=True)):
        last = parsed(path).body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test) == "__name__ == '__main__'" and "main(" in ast.unparse(last):
            rooms.append(os.path.relpath(path, root).replace(os.sep, "/"))
    return rooms


READERS_CLAIM = re.compile(r"\bonly\b.*?\breads? (?:a|the|its) command lines?\b", re.S)


def command_line_claims_untrue(rooms, text, where):
    """Each sentence that says only some files read a command line must name every room that reads one (by its path
    or as python -m part4.x.y)."""
    found = []
    for sentence in re.split(r"(?<=\.)\s+", text):
        claim = READERS_CLAIM.search(sentence)
        if claim:
            said = re.sub(r"\s+", " ", claim.group(0))
            found += [f"{where}: \"{said}\" leaves out {room}" for room in rooms
                      if room not in sentence and room[:-3].replace("/", ".") not in sentence]
    return found


def test_every_claim_of_who_reads_a_command_line_names_every_room_that_does():
    rooms = command_line_rooms(ROOT)
    assert rooms == ["part4/reproduction/calibration.py", "part4/tasks/squad_metric.py"]
    found = [line for path in python_files() + pages()
             for line in command_line_claims_untrue(rooms, prose(path), os.path.relpath(path, ROOT))]
    assert found == []


def test_a_claim_that_only_the_scripts_read_a_command_line_fails():
    rooms = command_line_rooms(ROOT)
    made_up = ("No package module imports a script, and only the scripts read a command line (`parse` in\n"
               "`part4/command_line/fine_tune_settings.py`, and `part4/command_line/script_settings.py`'s parsers). Each\n"
               "script's `main` turns its command line into settings objects once.")
    start = '"only the scripts read a command line" leaves out '
    assert command_line_claims_untrue(rooms, made_up, "docs/layout.md") == [
        f"docs/layout.md: {start}part4/reproduction/calibration.py", f"docs/layout.md: {start}part4/tasks/squad_metric.py"]
    true = ("Only the scripts and the rooms that run on their own read a command line: `python -m part4.tasks.squad_metric`\n"
            "and part4/reproduction/calibration.py. Each script's `main` reads its own.")
    assert command_line_claims_untrue(rooms, true, "docs/layout.md") == []
