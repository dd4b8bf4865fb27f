"""The whole article in one command: every experiment that gives its numbers, each with its time on this device, run in
order, resumable, the reproduction report rebuilt after each.

    python bert_part4_reproduce.py --plan              # what it runs, the numbers each gives, its time here; then exits
    python bert_part4_reproduce.py                     # run it all, the report after each experiment
    python bert_part4_reproduce.py --budget 2h         # the cheapest first, while their estimates fit in two hours
    python bert_part4_reproduce.py --models DIR --data ../shared/data        # offline: the models from a local mirror
    python bert_part4_reproduce.py --max-train-examples 32 --limit 50       # a quick pass: every experiment cut

The experiments are the report's commands (part4/experiments.py: one home), each run as its script's own command,
so that it writes the same results files as by hand. Their estimates are measured, not typed: a short calibration
times a few training steps and forward passes of each experiment's model at its shapes on this device
(part4/calibration.py; cached per device and model in the results folder, so that a second --plan is instant), times
the experiment's size (its steps, windows, examples). The cheapest run first, so that the report fills early; an
experiment that reads another's results runs after it (the math's tau is the SQuAD run's best).

An experiment whose results file records the same command (the same models, by their fingerprint; data; cuts) is
done, and skipped; a fine-tune stopped part-way resumes from its checkpoint when run again (the fine-tuning script's
own resume). Ctrl-C or SIGTERM stops with one line, and the same command goes on. A failed experiment is named with
its script's one-line error, and the others run; the end lists every failure with the command that re-runs it, and
the exit status is 1. The experiments run one after another in this one process: a fine-tune under torchrun is run by
hand (docs/processes-and-resume.md), and is then done here.
"""

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

from part4 import experiments
from part4.experiments import Inputs
from part4.files import check_writable_dir, read_json, write_atomic
from part4.flags import ArgumentParser, Fatal, Stopped, add_common_flags, run_main

ROOT = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(ROOT, "bert_part4_report.py")
LOG = "reproduce.log"                   # in the results folder: each invocation's plan, estimates and actual times
UNITS = {"h": 3600, "m": 60, "s": 1}


def positive(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be a positive whole number")
    return int(text)


def build_parser():
    p = ArgumentParser(description="Part 4, the whole article: every experiment that gives the article's numbers "
                                   "(the report's commands), with its time on this device, run in order, the "
                                   "cheapest first; done ones skipped, a stopped fine-tune resumed; the report "
                                   "(results/REPRODUCTION.md) rebuilt after each.")
    p.add_argument("--plan", action="store_true", help="print the plan (each experiment, the numbers it gives, its "
                                                       "estimated time here, the total) and exit")
    p.add_argument("--budget", help="run the plan in order while the estimates fit, e.g. 2h, 30m, 90s or 1h30m "
                                    "(default: all of it)")
    p.add_argument("--models", help="a folder of local models, one sub-folder per Hub id the article names "
                                    "(DIR/bert-base-uncased, DIR/textattack/bert-base-uncased-SST-2, ...; default: the "
                                    "Hub)")
    p.add_argument("--data", help="a folder laid out as ../shared/data (glue_data/SST-2, glue_data/MRPC, "
                                  "squad/dev-v1.1.json, squad/dev-v2.0.json; default: the Hub's datasets)")
    p.add_argument("--max-train-examples", type=positive, help="a quick pass: every fine-tune on its first N training "
                                                               "examples (the report marks them cut runs)")
    p.add_argument("--limit", type=positive, help="a quick pass: every fine-tune on its first N dev examples, the "
                                                  "SQuAD evaluation on its first N questions of each dev set")
    add_common_flags(p)
    return p


# --- The inputs: the flags checked, the mirror's folders named ---

def budget_seconds(text):
    """'2h' -> 7200, '1h30m' -> 5400, '90s' -> 90; anything else stops with one line."""
    parts = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?", text.strip())
    if not text.strip() or not parts:
        raise Fatal(f"--budget {text}: not a duration; write it as e.g. 2h, 30m, 90s or 1h30m")
    return sum(float(v) * unit for v, unit in zip(parts.groups(), UNITS.values()) if v)


def check_inputs(inputs):
    """The --models and --data folders must be folders, the results folder writable."""
    for flag, folder in (("--models", inputs.models), ("--data", inputs.data)):
        if folder is not None and not os.path.isdir(folder):
            raise Fatal(f"{flag} {folder}: {'not a folder' if os.path.exists(folder) else 'no such folder'}")
    check_writable_dir(inputs.results_dir, "--results-dir")
    return inputs


@dataclass
class Log:
    """Each line on stdout and, when running, appended to the results folder's reproduce.log."""
    path: str = None

    def say(self, line):
        print(line, flush=True)
        if self.path:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line + "\n")


def opened_log(plan, results_dir, argv):
    """--plan: stdout only. A run: the results folder's log too, opened with the command line and the time."""
    if plan:
        return Log()
    os.makedirs(results_dir, exist_ok=True)
    log = Log(os.path.join(results_dir, LOG))
    log.say(f"python bert_part4_reproduce.py {shlex.join(argv)}   ({time.strftime('%Y-%m-%d %H:%M:%S')})")
    return log


def duration(seconds):
    """Seconds as a reader wants them: '40 s', '12 min', '3.4 h', '2.1 days'."""
    if seconds is None:
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 48 * 3600 else f"{seconds / 86400:.1f} days"


# --- The estimates: each experiment's size times the units measured on this device ---

def estimated(chosen, inputs, log):
    """({experiment name: its estimated seconds, or None}, {experiment name: why it has none}). Units not in the
    cache are measured first (part4/calibration.py, which loads torch: only when something is not measured yet)."""
    cache_path = os.path.join(inputs.results_dir, experiments.CACHE)
    saved = read_json(cache_path) or {}
    device = experiments.device_key(inputs.device)
    cache = dict(saved.get(device) or {})
    absent = {e.name: experiments.missing(e, inputs) for e in chosen}
    works = [work for e in chosen if not absent[e.name] for _, work in experiments.size(e, inputs)]
    problems = {}
    if any(experiments.work_key(w, cache) not in cache for w in works):
        cache, problems = measured(works, inputs.device, cache, log)
        os.makedirs(inputs.results_dir, exist_ok=True)
        write_atomic(cache_path, json.dumps({**saved, device: cache}, indent=1, sort_keys=True) + "\n")
    costs, why = {}, {}
    for e in chosen:
        costs[e.name] = None if absent[e.name] else experiments.estimate(e, inputs, cache)
        if absent[e.name]:
            why[e.name] = "missing " + ", ".join(absent[e.name])
        elif costs[e.name] is None:
            why[e.name] = "; ".join(f"{m}: {p}" for m, p in problems.items() if m in models_of(e, inputs)) or "?"
    return costs, why


def measured(works, device, cache, log):
    """The units of works not in the cache measured by part4/calibration.py in a process of its own (torch is loaded
    there, never here), its lines said as they come: (the cache filled, {model: why} for the models it could not load)."""
    with tempfile.TemporaryDirectory() as tmp:
        request = os.path.join(tmp, "calibration.json")
        write_atomic(request, json.dumps({"works": [asdict(w) for w in works], "device": device, "cache": cache}))
        proc = subprocess.Popen([sys.executable, "-m", "part4.calibration", request], cwd=ROOT, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for line in proc.stdout:
            log.say(line.rstrip("\n"))
        err = proc.stderr.read()
        if proc.wait() != 0:
            raise Fatal(f"the calibration failed: {last_line(err) or f'exit status {proc.returncode}'}")
        answer = read_json(request)
    return answer["cache"], answer["problems"]


def models_of(experiment, inputs):
    return [experiments.model_path(hub_id, inputs) for _, hub_id in experiment.models]


def in_order(chosen, costs):
    """The cheapest first (done ones, not estimated, cost nothing; no estimate: last), then each experiment moved
    after those whose results it reads."""
    order = sorted(chosen, key=lambda e: (costs.get(e.name, 0) is None, costs.get(e.name, 0) or 0))
    for e in list(order):
        for name in e.after:
            before = [x for x in order if x.name == name]
            if before and order.index(e) < order.index(before[0]):
                order.remove(e)
                order.insert(order.index(before[0]) + 1, e)
    return order


# --- The plan ---

def show_plan(order, costs, *, why, done, inputs, log):
    """One line per experiment: the numbers it gives (count and sections), its estimate (or why there is none, or the
    results file that has it done), its command; then the total, and what the --models and --data folders lack."""
    log.say(f"The plan: {len(order)} experiments on {experiments.device_key(inputs.device)}")
    for k, e in enumerate(order, 1):
        sections = experiments.sections_of(e)
        state = (f"done ({done[e.name]})" if done[e.name] else
                 f"estimate {duration(costs[e.name])}" if costs[e.name] is not None else
                 f"no estimate: {why[e.name]}")
        log.say(f"{k:>2}. {e.name:<10} {state:<24} {len(experiments.numbers_of(e)):>3} numbers: "
                + "; ".join(f"{section.split(' (reference')[0]} {n}" for section, n in sections.items()))
        log.say(f"    {shlex.join(['python', *experiments.command(e, inputs)])}")
    to_do = [e for e in order if not done[e.name]]
    total = sum(costs[e.name] or 0 for e in to_do)
    unknown = [e.name for e in to_do if costs[e.name] is None]
    log.say(f"Total: {duration(total)} for {len(to_do)} experiments to run"
            + (f" (without {', '.join(unknown)}: no estimate)" if unknown else "")
            + f"; {len(order) - len(to_do)} done")
    show_mirror(order, inputs, log)


def show_mirror(order, inputs, log):
    """What the --models and --data folders are expected to hold, and what they lack."""
    expected = {path: what for e in order for what, path in experiments.expected_paths(e, inputs)}
    if not expected:
        log.say("Models and data: the Hub (--models DIR and --data DIR read local folders)")
        return
    lacking = [path for path in expected if not os.path.exists(path)]
    log.say(f"Local folders: {len(expected) - len(lacking)} of {len(expected)} expected found"
            + ("" if not lacking else "; missing: " + ", ".join(lacking)))


def within_budget(order, costs, done, budget):
    """(the experiments to run, those left with why): in order while the estimates fit; done ones cost nothing."""
    if budget is None:
        return order, []
    spent, run, left = 0.0, [], []
    for e in order:
        cost = 0.0 if done[e.name] else costs[e.name]
        if left or cost is None or spent + cost > budget:
            left.append((e, "no estimate" if cost is None else f"estimate {duration(cost)}"))
            continue
        spent += cost
        run.append(e)
    return run, left


# --- Running: each experiment unless done, the report after each ---

@dataclass
class Outcome:
    experiment: experiments.Experiment
    status: str                # done before | ran | failed | stopped
    seconds: float = 0.0
    estimate: float = None
    reason: str = ""


class Terminated(Exception):
    """SIGTERM to this process: passed on to the running experiment, which stops as on Ctrl-C."""


def raise_terminated(signum, frame):
    raise Terminated()


def run_experiment(experiment, inputs, estimate):
    """The experiment's command as a subprocess, its stdout on ours, its stderr kept for its one-line error. Ctrl-C
    and SIGTERM are passed on to it: it stops cleanly (a fine-tune saves its checkpoint) and we wait for it."""
    words = experiments.command(experiment, inputs)
    start = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as err:
        proc = subprocess.Popen([sys.executable, os.path.join(ROOT, words[0]), *words[1:]], stderr=err)
        try:
            code = proc.wait()
        except (KeyboardInterrupt, Terminated) as stop:
            proc.send_signal(signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT)
            proc.wait()
            return Outcome(experiment, "stopped", seconds=time.perf_counter() - start, estimate=estimate,
                           reason=last_line(err))
        status = "ran" if code == 0 else "failed"
        return Outcome(experiment, status, seconds=time.perf_counter() - start, estimate=estimate,
                       reason="" if code == 0 else last_line(err) or f"exit status {code}")


def last_line(err):
    """The script's one-line error: its last line on stderr that says why it stopped, else its last line (a
    traceback's: the exception)."""
    err.seek(0)
    lines = [part.strip() for line in err.read().splitlines() for part in line.split("\r") if part.strip()]
    said = [line for line in lines if line.startswith(("error:", "stopped", "interrupted"))]
    return (said or lines or [""])[-1]


def rebuild_report(results_dir, log):
    """bert_part4_report.py on the results folder: its summary line, or its one-line error."""
    done = subprocess.run([sys.executable, REPORT, "--results-dir", results_dir], capture_output=True, text=True)
    lines = (done.stdout if done.returncode == 0 else done.stderr).strip().splitlines()
    log.say(f"report: {lines[-2] if done.returncode == 0 and len(lines) > 1 else (lines or ['?'])[-1]}")


def run_in_order(order, costs, *, done, inputs, log):
    """Each experiment unless done, a progress line with its estimate, a line with its time beside the estimate,
    and the report rebuilt; a Ctrl-C or SIGTERM stops after the experiment running has stopped cleanly."""
    outcomes = []
    for k, e in enumerate(order, 1):
        if done[e.name]:
            log.say(f"[{k}/{len(order)}] {e.name}: done before ({done[e.name]}): skipped")
            outcomes.append(Outcome(e, "done before"))
            continue
        log.say(f"[{k}/{len(order)}] {e.name}: estimate {duration(costs[e.name])}: "
                f"{shlex.join(['python', *experiments.command(e, inputs)])}")
        outcome = run_experiment(e, inputs, costs[e.name])
        outcomes.append(outcome)
        log.say(f"[{k}/{len(order)}] {e.name}: {outcome.status} in {duration(outcome.seconds)} (estimate "
                f"{duration(outcome.estimate)})" + (f": {outcome.reason}" if outcome.status != "ran" else ""))
        rebuild_report(inputs.results_dir, log)
        if outcome.status == "stopped":
            raise Stopped(f"stopped during {e.name} ({outcome.reason or 'stopped'}); run the same command again to "
                          f"go on", 130)
    return outcomes


# --- The end: the estimates against the times, the failures, what the budget left ---

def closing(outcomes, left, inputs, log):
    ran = [o for o in outcomes if o.status != "done before"]
    if not ran:
        log.say("Nothing to run: every experiment is done (its results file records the same command)")
        rebuild_report(inputs.results_dir, log)
    timed = [o for o in ran if o.status == "ran" and o.estimate]
    if timed:
        estimate, actual = sum(o.estimate for o in timed), sum(o.seconds for o in timed)
        worst = max(timed, key=lambda o: max(o.seconds / o.estimate, o.estimate / o.seconds))
        log.say(f"Estimates: {duration(estimate)} estimated, {duration(actual)} taken ({actual / estimate:.2f}x the "
                f"estimate) over {len(timed)} experiments; furthest off: {worst.experiment.name}, "
                f"{duration(worst.estimate)} estimated, {duration(worst.seconds)} taken")
    for e, why in left:
        log.say(f"left by the budget: {e.name} ({why}): {shlex.join(['python', *experiments.command(e, inputs)])}")
    failed = [o for o in outcomes if o.status == "failed"]
    for o in failed:
        log.say(f"FAILED {o.experiment.name}: {o.reason}; to re-run it: "
                f"{shlex.join(['python', *experiments.command(o.experiment, inputs)])}")
    log.say(f"{len(ran) - len(failed)} run, {len(outcomes) - len(ran)} done before, {len(failed)} failed, "
            f"{len(left)} left; the report: {os.path.join(inputs.results_dir, 'REPRODUCTION.md')}")
    return 1 if failed else 0


# --- The command: the plan, then each experiment unless done, then how it went ---

def main(argv=None):
    args = build_parser().parse_args(argv)
    budget = budget_seconds(args.budget) if args.budget is not None else None
    inputs = check_inputs(Inputs(models=args.models, data=args.data, max_train_examples=args.max_train_examples,
                                 limit=args.limit, device=args.device, results_dir=args.results_dir))
    log = opened_log(args.plan, inputs.results_dir, sys.argv[1:] if argv is None else argv)
    done = {e.name: experiments.done_before(e, inputs) for e in experiments.EXPERIMENTS}
    chosen = [e for e in experiments.EXPERIMENTS if args.plan or not done[e.name]]
    costs, why = estimated(chosen, inputs, log)
    order = in_order(experiments.EXPERIMENTS, costs)
    show_plan(order, costs, why=why, done=done, inputs=inputs, log=log)
    if args.plan:
        return 0
    to_run, left = within_budget(order, costs, done, budget)
    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        outcomes = run_in_order(to_run, costs, done=done, inputs=inputs, log=log)
    except (KeyboardInterrupt, Terminated):
        raise Stopped("stopped between experiments; run the same command again to go on", 130)
    return closing(outcomes, left, inputs, log)


if __name__ == "__main__":
    sys.exit(run_main(main))
