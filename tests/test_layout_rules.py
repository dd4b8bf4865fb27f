"""The scripts and part4/ read as the style asks: no call passes more than 4 arguments by position, no function takes
more than 6 parameters (self and cls not counted). The article's table of entries in part4/paper/article.py (its Number
calls) reads as a table and is left out."""

import ast
import glob
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT

MAX_POSITIONAL, MAX_PARAMETERS = 4, 6
TABLE = {(os.path.join("part4", "paper", "article.py"), "Number")}


def offenders(path):
    """Each call with more than MAX_POSITIONAL positional arguments and each function with more than MAX_PARAMETERS
    parameters in one file, as 'file:line what'."""
    name = os.path.relpath(path, ROOT)
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg not in ("self", "cls")]
            if len(params) > MAX_PARAMETERS:
                found.append(f"{name}:{node.lineno} def {node.name} takes {len(params)} parameters")
        if isinstance(node, ast.Call) and len(node.args) > MAX_POSITIONAL:
            callee = ast.unparse(node.func)
            if (name, callee) not in TABLE:
                found.append(f"{name}:{node.lineno} call {callee} with {len(node.args)} positional arguments")
    return found


def checked_files():
    return sorted(glob.glob(os.path.join(ROOT, "*.py")) + glob.glob(os.path.join(ROOT, "part4", "**", "*.py"), recursive=True))


def test_no_call_passes_more_than_4_arguments_by_position_and_no_function_takes_more_than_6():
    found = [line for path in checked_files() for line in offenders(path)]
    assert not found, "\n".join(found)


def test_the_check_finds_a_long_call_and_a_long_signature(tmp_path):
    path = tmp_path / "example.py"
    path.write_text("def f(self, a, b, c, *, d, e, g, h):\n    return g(a, b, c, d, e)\n\n\n"
                    "def k(self, a, b, c, *, d, e, g):\n    return g(a, b, c, d, e=e)\n")
    found = [line.split(" ", 1)[1] for line in offenders(str(path))]
    assert found == ["def f takes 7 parameters", "call g with 5 positional arguments"]


# --- A room is not a script: only the two rooms that run on their own do anything under `__main__` ---

RUNNABLE = {os.path.join("part4", "tasks", "squad_metric.py"),          # the official metric, as the official scripts
            os.path.join("part4", "reproduction", "calibration.py")}    # bert_part4_reproduce.py's process of its own


def main_guard(path):
    """The ast of the `if __name__ == "__main__":` block at the end of a file's top level, or None."""
    with open(path, encoding="utf-8") as f:
        last = ast.parse(f.read()).body[-1]
    return last if isinstance(last, ast.If) and ast.unparse(last.test) == "__name__ == '__main__'" else None


def test_only_the_rooms_that_run_on_their_own_do_anything_as_a_script():
    rooms = [p for p in glob.glob(os.path.join(ROOT, "part4", "**", "*.py"), recursive=True)
             if os.path.basename(p) != "__init__.py" and os.path.relpath(p, ROOT) not in RUNNABLE]
    for path in rooms:
        guard = main_guard(path)
        assert guard is None or "not_a_script(" in ast.unparse(guard), f"{os.path.relpath(path, ROOT)} runs as a script"
    for path in RUNNABLE:
        assert "main(" in ast.unparse(main_guard(os.path.join(ROOT, path)))


# --- Imports run one way: each folder of part4/ imports only the folders before it in docs/layout.md ---

def folder_order():
    """The folders of part4/ in docs/layout.md's order, ground first (its numbered list: "1. `paper`: ...")."""
    with open(os.path.join(ROOT, "docs", "layout.md"), encoding="utf-8") as f:
        return re.findall(r"^\d+\. `(\w+)`: ", f.read(), re.M)


def imported(path):
    """(line, module) of every import of part4 or of a script in a file, anywhere in it, by its dotted name."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            package = node.module == "part4" or node.module.count(".") == 1       # from part4.run import plan
            found += [(node.lineno, f"{node.module}.{alias.name}" if package else node.module) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return [(line, m) for line, m in found if m.startswith(("part4.", "bert_part4_"))]


def against_the_order(path, order, root=ROOT):
    """Each import of a file against the order, as 'file:line imports module': a folder of part4/ importing a folder
    after it (or one that is not in the order), a script importing a script."""
    name = os.path.relpath(path, root).replace(os.sep, "/")
    parts = name.split("/")
    found = []
    for line, module in imported(path):
        if module.startswith("bert_part4_"):
            bad = True
        elif len(parts) == 1 or len(parts) == 2:                             # a script, or part4/__init__.py
            bad = module.split(".")[1] not in order
        else:
            target = module.split(".")[1]
            bad = target not in order or order.index(target) > order.index(parts[1])
        if bad:
            found.append(f"{name}:{line} imports {module}")
    return found


def test_each_folder_imports_only_the_folders_before_it_and_no_script_another():
    order = folder_order()
    assert sorted(order) == sorted(d for d in os.listdir(os.path.join(ROOT, "part4"))
                                   if os.path.isfile(os.path.join(ROOT, "part4", d, "__init__.py")))
    found = [line for path in checked_files() for line in against_the_order(path, order)]
    assert not found, "\n".join(found)
    with open(os.path.join(ROOT, "docs", "layout.md"), encoding="utf-8") as f:
        assert re.findall(r"^### `part4/(\w+)/`", f.read(), re.M) == order        # its tables in the same order


def test_no_two_rooms_of_a_folder_import_each_other():
    rooms = {os.path.relpath(p, ROOT)[:-3].replace(os.sep, "."): p
             for p in glob.glob(os.path.join(ROOT, "part4", "**", "*.py"), recursive=True)}
    imports = {room: {m for _, m in imported(path)} for room, path in rooms.items()}
    both = [f"{a} <-> {b}" for a in imports for b in imports[a] if a < b and a in imports.get(b, ())]
    assert not both, both


def test_the_order_check_finds_an_import_upward_and_a_script_importing_a_script(tmp_path):
    (tmp_path / "part4" / "data").mkdir(parents=True)
    room = tmp_path / "part4" / "data" / "example.py"
    room.write_text("from part4.paper.recipe import MAX_LEN\n\n\ndef f():\n    from part4.run import plan\n")
    script = tmp_path / "bert_part4_example.py"
    script.write_text("import bert_part4_heads\nfrom part4.tasks import families\n")
    order, root = ["paper", "data", "tasks", "run"], str(tmp_path)
    assert [line.split(" ", 1)[1] for line in against_the_order(str(room), order, root)] == ["imports part4.run.plan"]
    assert [line.split(" ", 1)[1] for line in against_the_order(str(script), order, root)] == ["imports bert_part4_heads"]


@pytest.mark.slow
def test_a_room_run_as_a_module_does_nothing():
    done = subprocess.run([sys.executable, "-m", "part4.paper.article"], cwd=ROOT, capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
