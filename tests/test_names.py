"""Names that explain themselves: in the scripts and part4/, no function name is defined twice for two things, and no
setting of any script's command line shares its name with a function. A name defined more than once is allowed only
where every definition is one member of one protocol, listed below with its reason."""

import ast
import glob
import os
from collections import defaultdict

from conftest import ROOT

# The protocols whose members are defined once per module or class that implements them, each with why it is one thing.
COMMAND = {"main", "build_parser"}     # each runnable file's own main(argv=None), the table of contents of its command
#                                        (STYLE point 7), and the parser of its command line: the scripts,
#                                        part4.tasks.squad_metric, part4.reproduction.calibration
FAMILY = ("Family", {"Classification", "MultipleChoice", "SpanExtraction"})   # part4/tasks/families.py's Family protocol:
#                                        how each head family reads, encodes and scores its tasks, a method per member
# Python's own protocols (__init__, __enter__, __exit__, __call__): a name that begins and ends with two underscores.
# A method that overrides its base class's (in the same file) is the base's method, specialised.


def definitions(path):
    """[(name, the ast.ClassDef it is a method of or None, line)] of every function a file defines, nested ones included,
    and {class name: the names of the methods it defines} of the file's classes."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found, methods = [], {}

    def visit(node, owner):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((child.name, owner, child.lineno))
                visit(child, None)
            elif isinstance(child, ast.ClassDef):
                methods[child.name] = {n.name for n in child.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
                visit(child, child)
            else:
                visit(child, owner)
    visit(tree, None)
    return found, methods


def one_protocols_member(name, owner, methods, family):
    """Is this definition of name one member of a protocol (listed above)?"""
    protocol, implementing = family
    if name.startswith("__") and name.endswith("__"):
        return True
    if owner is None:
        return name in COMMAND
    if owner.name in implementing | {protocol} and name in methods.get(protocol, ()):
        return True
    return any(name in methods.get(ast.unparse(base), ()) for base in owner.bases)


def checked_files():
    return sorted(glob.glob(os.path.join(ROOT, "*.py")) + glob.glob(os.path.join(ROOT, "part4", "**", "*.py"), recursive=True))


def defined_twice(files, family=FAMILY):
    """{name: ['file:line', ...]} of each function name defined more than once across files, the protocols' members
    left out."""
    where = defaultdict(list)
    for path in files:
        found, methods = definitions(path)
        for name, owner, line in found:
            if not one_protocols_member(name, owner, methods, family):
                where[name].append(f"{os.path.relpath(path, ROOT)}:{line}")
    return {name: places for name, places in where.items() if len(places) > 1}


def test_no_function_name_is_defined_twice_for_two_things():
    twice = defined_twice(checked_files())
    assert not twice, "\n".join(f"{name}: {', '.join(places)}" for name, places in sorted(twice.items()))


def test_the_scan_finds_a_name_defined_twice_and_leaves_a_protocols_members(tmp_path):
    one, two = tmp_path / "one.py", tmp_path / "two.py"
    one.write_text("def main(argv=None):\n    pass\n\n\ndef read(x):\n    def inner():\n        pass\n")
    two.write_text("class Family:\n    def read(self):\n        pass\n\n\nclass A(Family):\n    def read(self):\n"
                   "        pass\n\n    def __init__(self):\n        pass\n\n\nclass B:\n    def read(self):\n        pass\n\n"
                   "    def __init__(self):\n        pass\n\n\ndef main(argv=None):\n    def inner():\n        pass\n")
    twice = defined_twice([str(one), str(two)], ("Family", {"A"}))
    assert sorted(twice) == ["inner", "read"]
    assert [p.rsplit(":", 1)[1] for p in twice["read"]] == ["5", "15"]


def every_setting():
    """The settings every command line declares, by the name its parser gives each (argparse's dest)."""
    import bert_part4_report
    import bert_part4_reproduce
    from part4.command_line import fine_tune_parser, script_settings
    from part4.tasks import squad_metric
    parsers = [fine_tune_parser.build_parser(), script_settings.heads_parser(), script_settings.squad_parser(),
               script_settings.math_parser(), bert_part4_report.build_parser(), bert_part4_reproduce.build_parser(),
               squad_metric.build_parser()]
    return {action.dest for p in parsers for action in p._actions} - {"help"}


def test_no_setting_shares_its_name_with_a_function():
    functions = defaultdict(list)
    for path in checked_files():
        for name, _, line in definitions(path)[0]:
            functions[name].append(f"{os.path.relpath(path, ROOT)}:{line}")
    shared = {name: functions[name] for name in every_setting() if name in functions}
    assert not shared, "\n".join(f"{name}: {', '.join(places)}" for name, places in sorted(shared.items()))


def test_the_classes_listed_as_head_families_implement_the_family_protocol():
    from part4.tasks import families
    members = {m for m in vars(families.Family) if not m.startswith("_")}
    for name in FAMILY[1]:
        assert all(callable(getattr(getattr(families, name), m, None)) for m in members), name
