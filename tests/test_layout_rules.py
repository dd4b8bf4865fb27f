"""The scripts and part4/ read as the style asks: no call passes more than 4 arguments by position, no function takes
more than 6 parameters (self and cls not counted). The article's table of entries in part4/paper/article.py (its number and
row calls) reads as a table and is left out."""

import ast
import glob
import os

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
