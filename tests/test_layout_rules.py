"""The scripts and part4/ read as the style asks: no call passes more than 4 arguments by position, no function takes
more than 6 parameters (self and cls not counted). The article's table of entries in part4/paper/article.py (its number and
row calls) reads as a table and is left out."""

import ast
import glob
import os
import subprocess
import sys

import pytest
from conftest import ROOT

MAX_POSITIONAL, MAX_PARAMETERS = 4, 6
TABLE = {(os.path.join("part4", "paper", "article.py"), "number"), (os.path.join("part4", "paper", "article.py"), "row")}


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


# --- A room run as a script says so one way: sys.exit(not_a_script("<its path>", ...)) ---

RUNNABLE = {os.path.join("part4", "tasks", "squad_metric.py"),          # the official metric, as the official scripts
            os.path.join("part4", "reproduction", "calibration.py")}    # bert_part4_reproduce.py's process of its own


def main_guard(path):
    """The ast of the `if __name__ == "__main__":` block at the end of a file's top level, or None."""
    with open(path, encoding="utf-8") as f:
        last = ast.parse(f.read()).body[-1]
    return last if isinstance(last, ast.If) and ast.unparse(last.test) == "__name__ == '__main__'" else None


def test_every_room_run_as_a_script_says_so_one_way_naming_itself():
    rooms = [p for p in glob.glob(os.path.join(ROOT, "part4", "**", "*.py"), recursive=True)
             if os.path.basename(p) != "__init__.py" and os.path.relpath(p, ROOT) not in RUNNABLE]
    for path in rooms:
        guard, name = main_guard(path), os.path.relpath(path, ROOT).replace(os.sep, "/")
        assert guard is not None, f"{name}: no `if __name__ == '__main__':` at its end"
        assert len(guard.body) == 1, name
        call = guard.body[0].value
        assert ast.unparse(call.func) == "sys.exit" and ast.unparse(call.args[0].func) == "not_a_script", name
        assert call.args[0].args[0].value == name, name
    for path in RUNNABLE:
        assert "main(" in ast.unparse(main_guard(os.path.join(ROOT, path)))


@pytest.mark.slow
def test_a_room_run_as_a_module_says_in_one_line_which_script_to_run():
    done = subprocess.run([sys.executable, "-m", "part4.paper.article"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("part4/paper/article.py is a module, not a script: run python bert_part4_report.py (the "
                           "article's numbers beside ours)\n")
