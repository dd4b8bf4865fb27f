"""How much of part4/ one run walks through: the files and the distinct functions of part4/ that a command runs.

A reader who follows one run beside the article opens each of these rooms; the counts say how many. The command runs
in this process under sys.setprofile; only functions and methods are counted (module and class bodies, lambdas
and comprehensions are not). By default it is
`bert_part4_finetune.py mrpc 2e-5` on a tiny BERT built here with the real vocabulary (../shared/data), 32 training
and 32 dev examples on the CPU, its results in a temporary folder:

    python bench/trace_run.py                      # the MRPC run: files and functions, then the count of each file
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


def traced(script, argv):
    """{file of part4/: {function names}} run by `script` with `argv`, in this process."""
    seen = collections.defaultdict(set)

    def profile(frame, event, arg):
        code = frame.f_code
        if (event == "call" and code.co_filename.startswith(PACKAGE) and code.co_name not in SKIPPED
                and code.co_flags & inspect.CO_OPTIMIZED):            # a function's code; a class body's is not
            seen[os.path.relpath(code.co_filename, ROOT)].add(f"{code.co_qualname}:{code.co_firstlineno}")

    sys.argv = [script, *argv]
    sys.setprofile(profile)
    try:
        runpy.run_path(os.path.join(ROOT, script), run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (0, None):
            raise
    finally:
        sys.setprofile(None)
    return seen


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--script", default="bert_part4_finetune.py", help="the script to trace (default: the fine-tune)")
    parser.add_argument("--quiet", action="store_true", help="only the totals, not each file's count")
    parser.add_argument("argv", nargs="*", help="the script's own arguments (default: the MRPC run above)")
    args = parser.parse_args()
    sys.path.insert(0, ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        argv = args.argv or ["mrpc", "2e-5", "--model", tiny_bert(os.path.join(tmp, "tiny")), "--data-dir",
                             os.path.join(DATA, "glue_data"), "--max-train-examples", "32", "--max-dev-examples", "32",
                             "--device", "cpu", "--results-dir", os.path.join(tmp, "results")]
        seen = traced(args.script, argv)
    functions = sum(len(names) for names in seen.values())
    print(f"{args.script} {' '.join(args.argv) or 'mrpc 2e-5 (tiny BERT, 32 + 32 examples, CPU)'}: "
          f"{len(seen)} files of part4/, {functions} distinct functions", file=sys.__stdout__)
    if not args.quiet:
        for path, names in sorted(seen.items(), key=lambda item: -len(item[1])):
            print(f"  {len(names):4d}  {path}", file=sys.__stdout__)


if __name__ == "__main__":
    main()
