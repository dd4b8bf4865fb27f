"""One fine-tuning run around the paper's loop: everything it does that the paper does not say, in one room. Its log and
progress bar; its lines (the preamble, each evaluation, the FINAL line); this process's share of each batch (made on
the host, then on the device) and the model DDP-wrapped under torchrun; the training loss summed over the processes
(a non-finite one stops the run); the dev scores at the run's cadence (part4/paper/recipe.py eval_every); a clean stop
on SIGTERM or Ctrl-C, and when to write a checkpoint (the files themselves: part4/run/run_files.py); the results saved
(the JSON and log, the model kept when asked, the learning curve). bert_part4_finetune.py's fine_tune holds the recipe
and calls these by name."""

import math
import os
import resource
import shlex
import signal
import sys
import threading
import time
from contextlib import contextmanager
from functools import partial
from time import monotonic

import numpy as np
import torch
from tqdm import tqdm

from part4.command_line.declarations import Fatal, Stopped, readable_time, shown_duration
from part4.command_line.fine_tune_settings import computation_on
from part4.data.batches import collate, epoch_batches, to_device
from part4.data.readers import TASKS
from part4.models.folders import loaded_record, weights_line
from part4.models.loading import ALONE, WithoutCudnnAttention, autocast, has_fused_adamw, model_type_note, summed
from part4.output.results_files import (
    ADAMW_MOMENTS,
    CHECKPOINT_SIZE,
    RANDOM_HEAD,
    RU_MAXRSS_UNIT,
    Log,
    beside_article,
    check_room,
    line_plot,
    portable,
    write_atomic,
)
from part4.paper.article import (
    ARTICLE_BEFORE,
    ARTICLE_FINAL,
    ARTICLE_MODEL,
    FINETUNE,
    PAPER_OPTIMISER,
    article_final,
    article_runs,
)
from part4.paper.recipe import eval_every, evaluations_made
from part4.run.packing import packed_or_padded, padding_free_problem, with_real_tokens
from part4.run.run_files import Checkpoint, article_setting, recorded_command, run_name, run_settings, saved_model_folders

HOST = torch.device("cpu")
LARGE_MEMORY = 2e9      # bytes: a run that takes more says so before it starts (a laptop of 8 GB would feel it)
STOP_SIGNALS = {signal.SIGINT: ("Ctrl-C", 130), signal.SIGTERM: ("SIGTERM", 143)}   # caught while the loop runs


class TrainingRun:
    """One run of a task's plan (part4/run/plan.py Plan) for one Job, around the loop:

        run = TrainingRun(job, plan)
        net = run.start(model, head, opt, sched, steps=steps, warm=warm)   # from its checkpoint, or from step 0
        with run.stoppable():                                    # Ctrl-C and SIGTERM: a checkpoint, then a clean stop
            for epoch, batch, weight in run.batches():           # the batches left, this process's rows of each
                ...                                              # the recipe's step
                run.after_step(epoch, loss)
        results = run.final_results()

    What it holds: the task's config, family and data (plan.data, part4/run/plan.py TaskData), where it runs (device,
    autocast dtype, the processes that share it), its log (report), its recorded settings and checkpoint, and once
    started the model, how its output layer came (head), the optimiser and schedule, and how its steps are computed."""

    def __init__(self, job, plan):
        self.job, self.config, self.family, self.data = job, plan.config, plan.family, plan.data
        self.device, self.dtype = plan.where.device, plan.where.dtype
        # the processes that train this run together: all of them in data mode, each process alone in runs mode
        self.processes = plan.where.processes if plan.mode == "data" else ALONE
        c, self.name = self.config.settings, run_name(self.config, job)
        self.settings = run_settings(self.config, job, family=self.family, train_rows=len(self.data.train["input_ids"]),
                                     dtype=self.dtype, processes=self.processes)
        main = plan.where.processes.is_main and self.processes.is_main
        self.report = Log(self.name, c.results_dir, quiet=not main)
        self.checkpoint = Checkpoint(os.path.join(c.results_dir, self.name + ".checkpoint"), self.settings,
                                     self.processes, self.device, again=shlex.join(["python", FINETUNE, *c.argv]))
        # {"pad_to_multiple_of", "cudnn_attention"}: how the steps are computed on this device
        self.device_computation = computation_on(c, self.device.type)
        self.fused_adamw = c.fused_adamw and has_fused_adamw(self.device)   # AdamW's fused kernel, where torch has one
        self.losses, self.received, self.handlers = [], None, {}          # the signal received while the loop runs

    def start(self, model, head, opt, sched, *, steps, warm):
        """The run started: the room for its files checked; then from its checkpoint when one was saved (the model,
        optimiser and schedule loaded, its log lines said again), else from step 0 (begin: the preamble, the untrained
        head's dev score, the cost line). head: how the model's output layer came (part4/models/loading.py Head; None
        with --init random). Returns the model each step trains through: itself alone, DistributedDataParallel under
        torchrun (wrapped)."""
        c, data = self.config.settings, self.data
        self.model, self.head, self.opt, self.sched, self.steps, self.warm = model, head, opt, sched, steps, warm
        forward = model.base_model.forward                   # its steps padding-free: make_padding_free applied, and held
        self.packed = isinstance(forward, partial) and forward.func is packed_or_padded
        cut = c.evals is None and data.n_train < data.n_train_all       # a cut run evaluates as often as it can
        self.eval_every = eval_every(self.job.dev_evaluations, steps, cut=cut)
        self.checkpoint_every, self.saved_at = c.checkpoint_every, monotonic()   # the clock starts with the run
        self.weight_bytes = weights = sum(t.numel() * t.element_size() for t in model.state_dict().values())  # as saved
        check_room([(self.checkpoint.path, CHECKPOINT_SIZE * weights, "a resume checkpoint (the model, AdamW's two moments)"),
                    *[(f, weights, "the model saved") for f in saved_model_folders(self.config, [self.job]) if c.save_model]])
        loaded = self.checkpoint.resumed(model, opt, sched, report=self.report, steps=steps)
        # how the run is computed, beside its settings (which decide its numbers): padding-free training steps or padded
        # ones, AdamW's fused kernel or its loop of tensor operations (a resumed run's: its checkpoint's), the multiple
        # its batches' widths were rounded up to (1: each its own longest), cuDNN's attention kernels allowed or left out
        # (on CUDA; none elsewhere). Recorded under names of their own: what ran, beside the flags as given
        # (padding_free_steps ran; the flag --padding-free is the command's padding_free)
        self.computation = {"padding_free_steps": self.packed, "fused_adamw": bool(opt.param_groups[0].get("fused")),
                            **self.device_computation}
        if loaded is None:
            self.step, self.curve = 0, []
            self.before = self.begin()
            self.t0 = time.time()                                        # the training time starts at its first step
        else:
            state, self.losses = loaded
            self.before, self.step, self.curve = state["before"], state["step"], list(state["curve"])
            self.t0 = time.time() - state["elapsed"]
        return wrapped(model, self.processes, self.device, cudnn_attention=self.device_computation["cudnn_attention"])

    def begin(self):
        """A run from step 0: the preamble (and, where an interrupted run of these settings had gone further without
        keeping a checkpoint, the steps repeated), then the score of the untrained head (the article's beside it) and
        what the run will cost here. Returns that score."""
        config, family, head = self.config, self.family, self.head
        for line in preamble(self):
            self.report.say(line)
        reached = self.checkpoint.reached_before
        if reached:
            self.report.say(f"(no checkpoint kept: the interrupted run had reached step {reached}/{self.steps}; started "
                            f"over, {reached} steps repeated)")
        start = time.perf_counter()                          # the dev scores, on the first process only, timed
        before = family.evaluate(self.model, self.data.devs, self.data.tok, device=self.device,
                                 dtype=self.dtype) if self.processes.is_main else None
        evaluation = time.perf_counter() - start
        init = config.settings.init
        if init == "random":
            fresh = "every weight random, --init random"
        elif head.kept:
            fresh = family.kept_head
        else:
            fresh = family.fresh
        scores = family.format(before) if self.processes.is_main else ""
        theirs = ""
        if config.task in ARTICLE_BEFORE and init == "pretrained" and not head.kept:
            theirs = beside_article(ARTICLE_BEFORE[config.task], RANDOM_HEAD)
        self.report.say(f"before fine-tuning ({fresh}): {scores}"
                        + family.baseline(self.data.majority, self.data.devs) + theirs)
        self.report.say(self.cost_line(evaluation))
        return before

    def cost_line(self, evaluation):
        """What the run will cost here, said before its first step: its steps times one step timed (the first batch's
        loss forward and back, its update left out; the RNG forked and the gradients cleared after: nothing of the run
        changes), its dev evaluations times the one before training (evaluation, in seconds), and its memory at the
        peak where it is large, as a range (this process's so far, after the step, with AdamW's two moments to come; up
        to `later` times that, for the wider batches and the allocator's leftovers of the steps after it)."""
        _, batch, _ = next(self.batches())                                   # the first batch, as the loop gets it
        accelerators = [self.device] if self.device.type != "cpu" else []
        with torch.random.fork_rng(accelerators, device_type=self.device.type if accelerators else "cuda"):
            start = time.perf_counter()
            with autocast(self.device, self.dtype):
                self.family.loss(self.model, batch).backward()
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            step = time.perf_counter() - start
        self.model.zero_grad(set_to_none=True)
        evals = evaluations_made(self.steps, self.eval_every)
        total = self.steps * step + evals * evaluation
        peak = (torch.cuda.max_memory_allocated(self.device) if self.device.type == "cuda" else
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * RU_MAXRSS_UNIT)
        peak += ADAMW_MOMENTS * self.weight_bytes                                        # AdamW's two moments, to come
        # A range: the first batch's step, up to `later` times it, which a later batch wider than the first and what
        # the steps leave to the allocator take (measured on the CPU: the SQuAD stand-ins' peaks 1.13x and 1.3x this)
        later = 1.35
        memory = (f"; memory about {peak / 1e9:.1f} to {later * peak / 1e9:.1f} GB at its peak"
                  if peak >= LARGE_MEMORY else "")
        evaluations = f"{evals} dev evaluation{'s' if evals > 1 else ''}"
        return (f"cost here: {self.steps} steps x {step:.2f} s + {evaluations} x {evaluation:.1f} s = about "
                f"{readable_time(total)} (one step and the evaluation before training timed on {self.device.type}{memory})")

    @contextmanager
    def stoppable(self):
        """While the loop runs: its progress bar, and SIGTERM (a cluster's notice before preemption) and Ctrl-C only
        raise a flag: the loop finishes its step, saves a checkpoint and stops (after_step). Outside the main thread
        nothing is caught. After the loop, however it ended, the bar closed and the handlers as they were."""
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self.handlers[sig] = signal.signal(sig, self.caught)
        self.bar = tqdm(total=self.steps, initial=self.step, desc=self.name, unit="step", file=sys.stderr, leave=False,
                        disable=self.report.quiet)
        try:
            yield
        finally:
            self.bar.close()
            for sig, handler in self.handlers.items():
                signal.signal(sig, handler)

    def caught(self, signum, frame):
        self.received = signum

    # --- this process's share of each batch ---

    def batches(self):
        """The paper's random batches of every epoch (grouped by length where the run says so), from the step the run
        stands at: (epoch, this process's rows of the batch on the device, the weight of its loss: 1 alone; see
        shard). Each batch is made on the host, padded to its longest row (rounded up to a multiple of
        --pad-to-multiple-of: on CUDA by default), with where its real tokens lie for a padding-free model, then sent
        to the device (part4/data/batches.py to_device): no step waits for the device to learn its shape."""
        train, job = self.data.train, self.job
        lengths = train["full_lengths"] if self.config.grouped else None
        epochs = epoch_batches(len(train["input_ids"]), job.batch_size, job.epochs, job.seed, lengths=lengths)
        multiple, packed = self.device_computation["pad_to_multiple_of"], self.packed
        every_batch = []
        for epoch, in_epoch in enumerate(epochs, start=1):
            for idx in in_epoch:
                every_batch.append((epoch, idx))
        for epoch, idx in every_batch[self.step:]:
            rows, weight = shard(idx, self.processes)
            batch = collate(train, rows, HOST, multiple=multiple, max_width=self.family.max_len)
            yield epoch, to_device(with_real_tokens(batch) if packed else batch, self.device), weight

    # --- after each step: the loss kept, the dev scores at the run's cadence, a checkpoint, a clean stop ---

    def after_step(self, epoch, loss):
        """After each step: its loss kept (this process's share of the batch's mean loss, on the device until the next
        evaluation reads it); the dev scores every few steps and at the end (a log line each, and the step reached
        kept beside the checkpoint); then, decided alike on every process (a checkpoint gathers from all of them:
        stop_or_save), a checkpoint after a dev evaluation before the last once --checkpoint-every has passed since the
        last one (or the run's start) on the first process's clock, and on SIGTERM or Ctrl-C a checkpoint, then a
        clean stop."""
        self.losses.append(loss / self.processes.world)
        self.step += 1
        self.bar.update()
        evaluated = self.step % self.eval_every == 0
        if evaluated or self.step == self.steps:
            self.curve.append(self.evaluation(epoch))
            self.checkpoint.reached(self.step)
        due = (evaluated and self.step < self.steps and self.processes.is_main
               and monotonic() - self.saved_at >= self.checkpoint_every)
        stopping, saving = stop_or_save(self.received is not None, due, self.processes, self.device)
        if saving:
            self.checkpoint_now(stopping)
        if stopping:
            self.stopped()

    def checkpoint_now(self, stopping):
        """The checkpoint of the run as it stands (its log lines with the one that says so), then that line. The clock
        to the next checkpoint starts when it is written."""
        said = self.saved_line(stopping)
        state = {"settings": self.settings, "step": self.step, "curve": self.curve, "before": self.before,
                 "lines": [*self.report.lines, said], "elapsed": time.time() - self.t0}
        self.checkpoint.write_checkpoint(self.model, self.opt, self.sched, state, losses=self.losses)
        self.saved_at = monotonic()
        self.report.say(said)

    def saved_line(self, stopping=False):
        """The log line of a checkpoint written (its path as the results folder was given, as the 'written:' line)."""
        where = f"(checkpoint at step {self.step}/{self.steps}: {self.checkpoint.path}"
        if stopping:
            return where + "; the run stops)"
        every = self.checkpoint_every
        return where + ("" if math.isinf(every) else f"; the next after {shown_duration(every)} at the earliest") + ")"

    def stopped(self):
        """Stop the run after a signal (its checkpoint saved): one line saying how to resume."""
        signal_name, code = STOP_SIGNALS.get(self.received, ("a signal to another process", 143))
        raise Stopped(f"stopped by {signal_name} at step {self.step}/{self.steps}: checkpoint saved to "
                      f"{portable(self.checkpoint.path)}; run the same command again to resume (no results were "
                      f"written)", code)

    def evaluation(self, epoch):
        """The mean training loss since the last evaluation (summed over the processes: one sync per evaluation, not per
        step; a non-finite loss stops the run, naming its step) and the dev scores, as one log line and a curve
        point."""
        window = summed(self.processes, torch.stack(self.losses).float())
        if not torch.isfinite(window).all():
            k = int((~torch.isfinite(window)).nonzero()[0])   # the first bad loss since the last line
            raise Fatal(f"the training loss became {window[k].item()} at step {self.step - len(self.losses) + 1 + k} "
                        f"(lr {self.job.lr}): stopped, no results written", code=1)
        self.losses, mean = [], window.mean().item()
        scores = self.family.evaluate(self.model, self.data.devs, self.data.tok, device=self.device,
                                      dtype=self.dtype) if self.processes.is_main else None   # on the first process only
        seconds = time.time() - self.t0
        point = {"step": self.step, "epoch": epoch, "train_loss": mean, "dev": scores, "seconds": round(seconds, 1)}
        shown = self.family.format(scores) if self.processes.is_main else ""
        self.report.say(f"step {self.step:>5}/{self.steps}  epoch {epoch}  train loss {mean:.4f}  {shown}  ({seconds:.0f} s)")
        return point

    # --- the end: the FINAL line and the results saved ---

    def final_results(self):
        """The FINAL line (the model at the end of training), the best dev score seen beside it, and the results saved;
        the results on the first of the processes that share the run, None on the others."""
        if not self.processes.is_main:
            return None
        config, family, job = self.config, self.family, self.job
        seconds, final = time.time() - self.t0, self.curve[-1]["dev"]
        self.report.say(final_line(config.task, family, job, final=final, seconds=seconds, init=config.settings.init))
        best = best_seen(self.curve, family)
        if family.selection(best["dev"]) > family.selection(final):     # said beside the result, never taken for it
            self.report.say(f"(best dev {family.selection_name} seen during training: {family.selection(best['dev']):.4f} "
                            f"at step {best['step']}; not the result: the result is the model at the end of training, "
                            f"since picking the best checkpoint by its dev score would flatter the dev score)")
        return self.save_results(seconds, final)

    def save_results(self, seconds, final):
        """The results JSON and log of the run (its steps, warmup steps, scores before and after, curve and seconds;
        where it ran, its settings and computation), the model kept when asked, the task's own outputs (its family's
        extra_outputs: GLUE's test-set predictions with --glue-submission), the checkpoint removed and the learning
        curve drawn. Returns the results."""
        config, job, data, family, report = self.config, self.job, self.data, self.family, self.report
        c, curve, best = config.settings, self.curve, best_seen(self.curve, family)
        result = {"name": report.name, "task": config.task, "model": portable(c.model), "lr": job.lr,
                  "batch_size": job.batch_size, "epochs": job.epochs, "steps": self.steps, "warmup_steps": self.warm,
                  "seed": job.seed, "device": str(self.device), "before": self.before, "final": final, "curve": curve,
                  "best_during_training": {"step": best["step"], "dev": best["dev"]}, "seconds": seconds,
                  "train_examples": data.n_train, "train_rows": len(data.train["input_ids"]),
                  "settings": self.settings,
                  "weights": loaded_record(data.model_folder, self.head) if c.init == "pretrained" else None,
                  "computation": self.computation}
        if c.save_model:
            result["saved_model"] = portable(save_model_folder(self.model, data.tok, saved_model_folders(config, [job])[0],
                                                               self.checkpoint.kept()))
            report.say(f"model saved to {result['saved_model']} (config, safetensors weights, tokenizer)")
        result |= family.extra_outputs(self, config.test_dir)
        report.save(result, cli=recorded_command(c, task=config.task), device=self.device)
        self.checkpoint.remove()
        line_plot(os.path.join(c.results_dir, report.name + "_curve.png"), [p["step"] for p in curve],
                  {"train loss": [p["train_loss"] for p in curve]}, "step",
                  right=("dev score", [family.selection(p["dev"]) for p in curve]))
        return result


def best_seen(curve, family):
    """The evaluation with the best dev score in Table 1's metric (MCC for CoLA, F1 for MRPC, Spearman for STS-B),
    the first of any ties: reported beside the result, never taken for it."""
    return max(curve, key=lambda c: family.selection(c["dev"]))


def save_model_folder(model, tok, path, kept=""):
    """save_pretrained into a temporary folder beside path, then rename: never half a model folder (one that cannot be
    written is one line, ending with kept)."""
    def write(tmp):
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
    return write_atomic(path, write, kept, folder=True)


# --- the processes that share a run: each its rows of every batch, the model DDP-wrapped, one decision to stop ---

def shard(idx, processes):
    """This process's rows of a global batch, and the weight that makes the processes' mean gradients add up to
    the gradient of the whole batch's mean loss (DDP averages over processes). A process left without a row (a
    last batch shorter than the number of processes) takes one with weight 0."""
    rows = np.array_split(np.asarray(idx), processes.world)[processes.rank].tolist()
    if not rows:
        return idx[:1], 0.0
    return rows, len(rows) * processes.world / len(idx)


def wrapped(model, processes, device, cudnn_attention=True):
    """The model each step trains through: itself alone, DistributedDataParallel across several processes; on
    CUDA without cudnn_attention, called with cuDNN's attention kernels left out (part4/models/loading.py
    WithoutCudnnAttention). Elsewhere there is no cuDNN attention: the model as it is."""
    net = model
    if processes.world > 1:
        ids = [device.index] if device.type == "cuda" else None
        net = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
    if device.type == "cuda" and not cudnn_attention:
        net = WithoutCudnnAttention(net)
    return net


def stop_or_save(stop, due, processes, device):
    """(stop, save), alike on every process: stop when any process received a signal, save when stopping or when a
    checkpoint is due (on the first process's clock). Alone, no collective and nothing read from the device; under
    torchrun one all_reduce of these two flags, the one the stop check makes at every step."""
    if processes.world > 1:
        flags = summed(processes, torch.tensor([float(stop), float(due)], device=device))
        stop, due = (bool(x) for x in (flags > 0).tolist())
    return stop, stop or due


# --- The run's lines: the preamble (the derived quantities first), each evaluation, the FINAL line, the best dev score seen ---

def preamble(run):
    """The derived quantities a run (TrainingRun, started) prints before it trains, in this order: its data, device,
    steps and warmup; how its steps are computed; what a cut run leaves out; the weights it starts from."""
    config, c, data, job, family, how = run.config, run.config.settings, run.data, run.job, run.family, run.computation
    device, world, steps = run.device, run.processes.world, run.steps
    # the data and device, the encoded training set (its family's describe), the steps and warmup
    lines = [f"task {config.task}: {data.n_train} training examples, "
             + ", ".join(f"{data.n_dev[k]} {k.replace('_', ' ')} examples" for k in data.devs) + f", device {device.type}"
             + (f" x {world} processes (each takes 1/{world} of every batch)" if world > 1 else ""),
             *family.describe(data.train),
             f"batch {job.batch_size}, {job.epochs} epochs = {steps} steps, learning rate {job.lr}, warmup {run.warm} "
             f"steps, weight decay {c.weight_decay}"]
    # how its steps are computed, as its results record it (computation), then the AdamW the paper used:
    # '(also: AdamW fused, clip 1.0, dropout 0.1, ...)'. A model the padding-free steps do not compute trains padded, and
    # a line before it says why; widths rounded and cuDNN's attention where that is not the recipe's plain padded
    # batches (nothing on the CPU by default); a flag that has no effect on this device says so
    if c.padding_free and not how["padding_free_steps"]:
        lines.append(f"padded steps, not padding-free: {padding_free_problem(run.model)}")
    kernels = ([f"widths rounded up to multiples of {how['pad_to_multiple_of']} tokens"]
               if how["pad_to_multiple_of"] > 1 else [])
    if device.type == "cuda":
        kernels.append("attention on cuDNN's kernels where SDPA picks them" if how["cudnn_attention"]
                       else "attention on SDPA's flash or memory-efficient kernels, not cuDNN's")
    elif c.cudnn_attention is not None:
        kernels.append(f"--cudnn-attention has no effect on {device.type}: no cuDNN attention there")
    padding = ("padding-free steps (every layer but attention on the real tokens only)" if how["padding_free_steps"]
               else "dynamic padding")
    model = run.model.config
    lines += [f"  (also: AdamW{' fused' if how['fused_adamw'] else ''}, clip {c.clip}, "
              f"dropout {getattr(model, 'hidden_dropout_prob', getattr(model, 'dropout', None))}, seed {job.seed}, "
              f"autocast {run.dtype or 'off (fp32)'}, {padding}" + "".join(", " + k for k in kernels)
              + (", batches grouped by length (paper: random batches)" if config.grouped else "")
              + f"; model {portable(c.model)}{model_type_note(run.model)}"
              + (", random weights (--init random)" if c.init == "random" else "") + f", article: {ARTICLE_MODEL})",
              f"  (AdamW is torch's: eps 1e-8, bias-corrected moments; paper: {PAPER_OPTIMISER})"]
    # what a cut run leaves out (and the flags that cut it), and how often it evaluates when that is not the recipe's
    cut = [f"{n} of {whole:,} {what} examples" for n, whole, what in [(data.n_train, data.n_train_all, "training")]
           + [(data.n_dev[k], data.n_dev_all[k], k.replace("_", " ")) for k in data.devs] if n < whole]
    if cut:
        flags = [flag for flag, n in c.cuts.items() if n]
        lines.append(f"  (cut, not the paper's: the first {', the first '.join(cut)}; {', '.join(flags)})")
    if run.eval_every != eval_every(job.dev_evaluations, steps, cut=False):
        lines.append(f"  (a cut run: a dev evaluation every {run.eval_every} steps, "
                     f"{evaluations_made(steps, run.eval_every)} in all, not the recipe's {job.dev_evaluations}, "
                     f"which are for full runs; --evals sets them)")
    # the weight files it starts from (and the dtype they were saved in, where it is not the fp32 they are loaded in),
    # its output layer (a new one, the paper's, or the checkpoint's, kept), any warning its folder gave when it was read
    if c.init == "pretrained":
        head = run.head
        said = family.kept_head if head.kept else family.new_head + (f" ({head.note})" if head.note else "")
        lines.append(weights_line(data.model_folder, said))
    return lines + list(data.model_folder.notes)


def final_line(task, family, job, final, seconds, init="pretrained"):
    """FINAL sst2 dev accuracy 0.9255 (807/872), dev F1 0.9279, training time 48.3 minutes, then the article's
    number for its setting only (batch 32, 3 epochs, seed 0, pre-trained; labelled with its model, which may not be
    ours) and the published ones, labelled."""
    line = f"FINAL {task} " + family.format(final, final=True) + f", training time {seconds / 60:.1f} minutes"
    article_run = article_setting(job, init)
    line += article_final(task, job.lr) if article_run else ""
    if task in TASKS and not (article_run and (task, job.lr) in ARTICLE_FINAL):
        ran = article_runs({t: TASKS[t].folder for t in TASKS})
        line += beside_article(f"no run with these settings (it ran {ran})")
    return line + "".join(f"   [{r}]" for r in family.references)
