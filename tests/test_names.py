"""Names that explain themselves: in the scripts and part4/, no function name is defined twice for two things, and no
setting of any script's command line shares its name with a function. A name defined more than once is allowed only
where every definition is one member of one protocol, listed below with its reason."""

import ast
import dataclasses
import glob
import os
from collections import defaultdict

from conftest import ROOT


def protocol_members(path, protocol):
    """The methods a Protocol class declares, read from its file."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    declared = next(c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == protocol)
    return {n.name for n in declared.body if isinstance(n, ast.FunctionDef)}


# The protocols whose members are defined once per module or class that implements them: {protocol: (its members, the
# classes that implement it, None for modules)}, each with why its members are one thing.
PROTOCOLS = {
    # each runnable file's own main(argv=None), the table of contents of its command (STYLE point 7): the scripts,
    # part4.tasks.squad_metric, part4.reproduction.calibration; and the parser of a runnable room's own command line,
    # part4.tasks.squad_metric's (a script's parser is its command line room's <script>_parser, part4/command_line)
    "a command": ({"main", "build_parser"}, None),
    # part4/tasks/families.py's Family: how a head family reads, encodes and scores its tasks, a method per member
    "a head family": (protocol_members(os.path.join(ROOT, "part4", "tasks", "families.py"), "Family"),
                      {"Family", "Classification", "MultipleChoice", "SpanExtraction"}),
    # a log: say(line) prints the line and keeps it (part4/output/results_files.py's Log; bert_part4_reproduce.py's
    # PassLog, which appends it to reproduce.log)
    "a log": ({"say"}, {"Log", "PassLog"}),
}
# Python's own protocols (__init__, __enter__, __exit__, __call__): a name that begins and ends with two underscores.
# A method that overrides its base class's (in the same file) is the base's method, specialised: it is not counted.


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


def protocol_of(name, owner, methods, protocols):
    """The protocol this definition of name is a member of (listed above), "" where it is not counted (a dunder, an
    override), or None."""
    if name.startswith("__") and name.endswith("__"):
        return ""
    for protocol, (members, classes) in protocols.items():
        if name in members and (owner is None if classes is None else owner is not None and owner.name in classes):
            return protocol
    if owner is not None and any(name in methods.get(ast.unparse(base), ()) for base in owner.bases):
        return ""
    return None


def checked_files():
    return sorted(glob.glob(os.path.join(ROOT, "*.py")) + glob.glob(os.path.join(ROOT, "part4", "**", "*.py"), recursive=True))


def defined_twice(files, protocols=PROTOCOLS):
    """{name: ['file:line' or '(protocol)', ...]} of each function name defined for more than one thing across files:
    the members of one protocol count as one."""
    where = defaultdict(list)
    for path in files:
        found, methods = definitions(path)
        for name, owner, line in found:
            protocol = protocol_of(name, owner, methods, protocols)
            place = f"({protocol})" if protocol else f"{os.path.relpath(path, ROOT)}:{line}"
            if protocol != "" and place not in where[name]:
                where[name].append(place)
    return {name: places for name, places in where.items() if len(places) > 1}


def test_no_function_name_is_defined_twice_for_two_things():
    twice = defined_twice(checked_files())
    assert not twice, "\n".join(f"{name}: {', '.join(places)}" for name, places in sorted(twice.items()))


def test_the_scan_finds_a_name_defined_twice_and_counts_a_protocols_members_once(tmp_path):
    one, two = tmp_path / "one.py", tmp_path / "two.py"
    one.write_text("def main(argv=None):\n"
                   "    pass\n\n\n"
                   "def read(x):\n"                 # line 5: a function read, not the protocol's
                   "    def inner():\n"
                   "        pass\n")
    two.write_text("class Family:\n"
                   "    def read(self):\n"           # the protocol F's member, declared
                   "        pass\n\n\n"
                   "class A(Family):\n"
                   "    def read(self):\n"           # implemented: F's member again
                   "        pass\n\n"
                   "    def __init__(self):\n"
                   "        pass\n\n\n"
                   "class B:\n"
                   "    def read(self):\n"           # line 15: a method read of a class not listed
                   "        pass\n\n"
                   "    def main(self):\n"           # line 18: a method main, not a command's
                   "        pass\n\n\n"
                   "class C(B):\n"
                   "    def read(self):\n"           # B's read, overridden: not counted
                   "        pass\n\n\n"
                   "def main(argv=None):\n"          # a command's main again
                   "    def inner():\n"
                   "        pass\n")
    twice = defined_twice([str(one), str(two)], {"a command": ({"main"}, None), "F": ({"read"}, {"Family", "A"})})
    assert sorted(twice) == ["inner", "main", "read"]
    assert [p.rsplit(":", 1)[-1] for p in twice["read"]] == ["5", "(F)", "15"]
    assert [p.rsplit(":", 1)[-1] for p in twice["main"]] == ["(a command)", "18"]


def every_setting():
    """The settings every command line declares, by the name its parser gives each (argparse's dest)."""
    from part4.command_line import fine_tune_settings, script_settings
    from part4.tasks import squad_metric
    parsers = [fine_tune_settings.finetune_parser(), script_settings.heads_parser(), script_settings.squad_parser(),
               script_settings.math_parser(), script_settings.report_parser(), script_settings.reproduce_parser(),
               squad_metric.build_parser()]
    declared = {f.name for f in dataclasses.fields(fine_tune_settings.Settings)}   # the flags' and what they resolve to
    return {action.dest for p in parsers for action in p._actions} - {"help"} | declared


def test_no_setting_shares_its_name_with_a_function():
    functions = defaultdict(list)
    for path in checked_files():
        for name, _, line in definitions(path)[0]:
            functions[name].append(f"{os.path.relpath(path, ROOT)}:{line}")
    shared = {name: functions[name] for name in every_setting() if name in functions}
    assert not shared, "\n".join(f"{name}: {', '.join(places)}" for name, places in sorted(shared.items()))


def test_the_classes_listed_as_head_families_implement_the_family_protocol():
    from part4.tasks import families, squad_spans
    members, classes = PROTOCOLS["a head family"]
    homes = {**dict.fromkeys(classes, families), "SpanExtraction": squad_spans}     # SQuAD's family lives with SQuAD
    for name in classes:
        assert all(callable(getattr(getattr(homes[name], name), m, None)) for m in members), name
