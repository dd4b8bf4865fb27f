"""How much of part4/ one run walks through: the files and the distinct functions of part4/ that a command runs.

A reader who follows one run beside the article opens each of these rooms; the counts say how many. The command runs
in this process under sys.setprofile; only functions and methods are counted (module and class bodies, lambdas
and comprehensions are not). By default it is
`bert_part4_finetune.py mrpc 2e-5` on a tiny BERT built here with the real vocabulary (../shared/data), 32 training
and 32 dev examples on the CPU, its results in a temporary folder:

    python bench/trace_run.py                      # the MRPC run: files and functions, then the count of each file
    python bench/trace_run.py --names              # and each function under its file, by its first line
    python bench/trace_run.py --script bert_part4_squad.py -- --v1-model M --only v1 --max-dev-examples 8 --device cpu
"""

import argparse
import collections
import inspect
import os
import runpy
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "part4") + os.sep
DATA = os.path.join(ROOT, "..", "shared", "data")
SKIPPED = ("<module>", "<lambda>", "<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


def tiny_bert(folder):
    """A 2-layer, H=32 BERT with random weights and bert-base-uncased's vocabulary, saved with its tokenizer."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer
    tok = BertTokenizer(vocab=os.path.join(DATA, "bert-base-uncased", "vocab.txt"))
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=37)
    BertModel(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def run_under(profile, script, argv):
    """`script` with `argv` run as __main__ in this process, `profile` seeing every call (sys.setprofile); a failing
    exit raises."""
    sys.argv = [script, *argv]
    sys.setprofile(profile)
    try:
        runpy.run_path(os.path.join(ROOT, script), run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (0, None):
            raise
    finally:
        sys.setprofile(None)

def traced(script, argv):
    """{file of part4/: {function names}} run by `script` with `argv`, in this process."""
    seen = collections.defaultdict(set)

    def profile(frame, event, arg):
        code = frame.f_code
        if (event == "call" and code.co_filename.startswith(PACKAGE) and code.co_name not in SKIPPED
                and code.co_flags & inspect.CO_OPTIMIZED):            # a function's code; a class body's is not
            seen[os.path.relpath(code.co_filename, ROOT)].add(f"{code.co_qualname}:{code.co_firstlineno}")

    run_under(profile, script, argv)
    return seen


LAYOUT = ("paper", "command_line", "output", "models", "data", "tasks", "run", "reproduction")   # docs/layout.md's order


def place(path):
    """A file's place in docs/layout.md's order: its folder's (1 to 8), a script at the root above them all (9)."""
    parts = path.split(os.sep)
    return LAYOUT.index(parts[1]) + 1 if parts[0] == "part4" and parts[1] in LAYOUT else len(LAYOUT) + 1


def followed(script, argv, entry="fine_tune"):
    """{parameter of `entry`: the functions it, or one of its parts, is passed on to, as file:name}, each once, in the
    order a reader following it first meets them while `entry` runs (a loop's steps repeat no stop): a call counts
    when one of its arguments is the parameter itself or one of the parameter's attributes that is an object of its
    own (not a number, a string or None: those are shared by value), or one of its attributes in turn."""
    import torch
    stops, watched = collections.defaultdict(list), {}

    def parts(obj, depth=2):
        """obj's attributes that are objects of their own, and theirs (depth: how many attributes deep)."""
        attrs = vars(obj) if hasattr(obj, "__dict__") and not isinstance(obj, torch.nn.Module) else {}
        if hasattr(obj, "__dataclass_fields__") or hasattr(obj, "_fields"):
            attrs = {name: getattr(obj, name) for name in getattr(obj, "__dataclass_fields__", None) or obj._fields}
        found = [v for v in attrs.values() if not isinstance(v, (int, float, str, bool, type(None), tuple))]
        return found + [p for v in found for p in parts(v, depth - 1)] if depth > 1 else found

    def profile(frame, event, arg):
        code = frame.f_code
        if event != "call" or not code.co_flags & inspect.CO_OPTIMIZED or code.co_name in SKIPPED:
            return
        if code.co_name == entry and not watched:
            for name in code.co_varnames[:code.co_argcount]:
                obj = frame.f_locals[name]
                watched[name] = [obj, *parts(obj)]
            return
        path = os.path.relpath(code.co_filename, ROOT)
        if not watched or path.startswith(".."):
            return
        args = [frame.f_locals.get(n) for n in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]]
        for name, objs in watched.items():
            stop = f"{path}:{code.co_qualname}"
            if stop not in stops[name] and any(a is o for a in args for o in objs):
                stops[name].append(stop)             # each function once, where the trail first meets it

    run_under(profile, script, argv)
    return stops


def follow_counts(calls):
    """(stops, files, returns up the layout's order, times run/ entered) of one parameter's calls."""
    files = [c.split(":")[0] for c in calls]
    up = sum(place(b) > place(a) for a, b in zip(files, files[1:]))
    entered = sum(b.startswith("part4/run/") and not a.startswith("part4/run/") for a, b in zip(files, files[1:]))
    return len(calls), len(set(files)), up, entered


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--script", default="bert_part4_finetune.py", help="the script to trace (default: the fine-tune)")
    parser.add_argument("--quiet", action="store_true", help="only the totals, not each file's count")
    parser.add_argument("--names", action="store_true",
                        help="each function counted, under its file, in line order (not with --quiet or --follow)")
    parser.add_argument("--follow", action="store_true",
                        help="follow fine_tune's parameters instead: each one's calls that pass it (or its parts) on, "
                             "their files, how often the trail returns up docs/layout.md's order and enters run/")
    parser.add_argument("argv", nargs="*", help="the script's own arguments (default: the MRPC run above)")
    args = parser.parse_args()
    if args.names and (args.quiet or args.follow):
        parser.error("--names lists each file's functions: not with --quiet (totals only) or --follow")
    sys.path.insert(0, ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        argv = args.argv or ["mrpc", "2e-5", "--model", tiny_bert(os.path.join(tmp, "tiny")), "--data-dir",
                             os.path.join(DATA, "glue_data"), "--max-train-examples", "32", "--max-dev-examples", "32",
                             "--device", "cpu", "--results-dir", os.path.join(tmp, "results")]
        if args.follow:
            for name, calls in followed(args.script, argv).items():
                stops, files, up, entered = follow_counts(calls)
                print(f"fine_tune's {name}: {stops} stops in {files} files; {up} returns up the layout's order; run/ "
                      f"entered {entered} times", file=sys.__stdout__)
                if not args.quiet:
                    print("    " + " -> ".join(c.split(":")[0].replace("part4/", "") for c in calls), file=sys.__stdout__)
            return
        seen = traced(args.script, argv)
    functions = sum(len(names) for names in seen.values())
    print(f"{args.script} {' '.join(args.argv) or 'mrpc 2e-5 (tiny BERT, 32 + 32 examples, CPU)'}: "
          f"{len(seen)} files of part4/, {functions} distinct functions", file=sys.__stdout__)
    if not args.quiet:
        for path, names in sorted(seen.items(), key=lambda item: -len(item[1])):
            print(f"  {len(names):4d}  {path}", file=sys.__stdout__)
            if args.names:
                for name in sorted(names, key=lambda n: int(n.rsplit(":", 1)[1])):
                    print(f"            {name}", file=sys.__stdout__)


if __name__ == "__main__":
    main()
