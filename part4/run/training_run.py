"""One fine-tuning run around the paper's loop: everything it does that the paper does not say, in one room, each a
call that bert_part4_finetune.py's fine_tune makes by name, in its order: the run resumed from its checkpoint, or
begun (the preamble: the derived quantities first; the untrained head's dev score; what the run will cost here, one
step timed and said before it is paid); this process's share of each batch (made on the host, then sent to the
device); each step's loss kept (summed over the processes at each evaluation: a non-finite one stops the run); the dev
scores at the run's cadence (part4/paper/recipe.py eval_every); a checkpoint on its clock, and on SIGTERM or Ctrl-C a
checkpoint and a clean stop (the file itself: part4/run/run_files.py Checkpoint); the FINAL line and the results saved
(the JSON and log, the model kept when asked, the learning curve). Its settings are the run's RunSettings
(part4/run/run_files.py), its data and head family the plan's TaskData (part4/run/command.py)."""

import json
import math
import os
import resource
import shlex
import signal
import sys
import threading
import time
from contextlib import contextmanager
from time import monotonic

import numpy as np
import torch
from tqdm import tqdm

from part4.command_line.declarations import Fatal, Stopped, readable_time, shown_duration
from part4.data.batches import MASKS_PADDED, collate, epoch_batches, to_device, with_real_tokens
from part4.data.readers import GLUE
from part4.models.loading import (
    DTYPE_NAMES,
    WithoutCudnnAttention,
    autocast,
    loaded_record,
    model_type_note,
    precision_note,
    summed,
    weights_line,
)
from part4.output.results_files import (
    ADAMW_MOMENTS,
    CHECKPOINT_SIZE,
    RANDOM_HEAD,
    RU_MAXRSS_UNIT,
    Log,
    beside_article,
    check_room,
    command_line,
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
from part4.run.run_files import SAVED_BY, Checkpoint, article_setting

HOST = torch.device("cpu")
LARGE_MEMORY = 2e9      # bytes: a run that takes more says so before it starts (a laptop of 8 GB would feel it)
STOP_SIGNALS = {signal.SIGINT: ("Ctrl-C", 130), signal.SIGTERM: ("SIGTERM", 143)}   # caught while the loop runs


class TrainingRun:
    """One run around the loop. Each method but caught (the signal handler) is a step that bert_part4_finetune.py's
    fine_tune calls by name, in its order: resume, or else say_preamble, score_before and time_and_say_cost; stoppable
    around the loop, whose batches it draws; step_done after each step, score_dev at the run's cadence, stop_or_save
    (then save_checkpoint, stop); final_results at the end. fine_tune is where the loop itself stands, written once.

    What it holds: the run's settings (run: RunSettings), the task's data, head family and how the output layer comes
    (data: TaskData, its output_layer), the model, the schedule and its optimiser (sched.optimizer: AdamW); its log,
    checkpoint, evaluation cadence, step, curve and how its steps are computed (computation)."""

    def __init__(self, run, data, model, sched, *, steps, warm):
        """The run's log and checkpoint, its cadence of dev evaluations, and the room its files need, checked before
        any work."""
        self.run, self.data, self.family, self.output_layer = run, data, data.family, data.output_layer
        self.model, self.opt, self.sched, self.steps, self.warm = model, sched.optimizer, sched, steps, warm
        self.log = Log(run.name, run.results_dir, quiet=run.quiet)
        self.checkpoint = Checkpoint(os.path.join(run.results_dir, run.name + ".checkpoint"), run.recorded,
                                     run.processes, run.device, again=shlex.join(["python", FINETUNE, *run.argv]))
        self.eval_every = eval_every(run.dev_evaluations, steps, cut=run.cut_cadence)   # a cut run: as often as it can
        self.checkpoint_every, self.saved_at = run.checkpoint_every, monotonic()   # the clock starts with the run
        self.weight_bytes = weights = sum(t.numel() * t.element_size() for t in model.state_dict().values())  # as saved
        check_room([(self.checkpoint.path, CHECKPOINT_SIZE * weights, "a resume checkpoint (the model, AdamW's two moments)"),
                    *([(run.saved_model, weights, "the model saved")] if run.saved_model else [])])
        # how the run is computed, beside its settings (which decide its numbers): padding-free training steps or padded
        # ones and how their dropout masks are drawn, AdamW's fused kernel or its loop of tensor operations (a resumed
        # run's: its checkpoint's), the multiple its batches' widths were rounded up to (1: each its own longest), cuDNN's
        # attention kernels allowed or left out (on CUDA; none elsewhere). Recorded under names of their own: what ran,
        # beside the flags as given (padding_free_steps ran, as RunSettings names it; the flag --padding-free is the
        # command's padding_free)
        self.computation = {"padding_free_steps": run.padding_free_steps,
                            "fused_adamw": bool(self.opt.param_groups[0].get("fused")), "dropout_masks": run.dropout_masks,
                            "pad_to_multiple_of": run.pad_to_multiple_of, "cudnn_attention": run.cudnn_attention}
        self.step, self.curve, self.before, self.t0 = 0, [], None, time.time()
        self.losses, self.received, self.handlers = [], None, {}          # the signal received while the loop runs

    # --- begun, or resumed from its checkpoint ---

    def resume(self):
        """Resumed from the run's checkpoint, when one was saved (True): the model, optimiser, schedule and this
        process's RNG states as they were, the interrupted run's lines said again, its step, curve, score before
        training and time gone on from there. False when there is none: the run begins at step 0."""
        loaded = self.checkpoint.load_into(self.model, self.opt, self.sched, log=self.log, steps=self.steps)
        if loaded is None:
            return False
        state, self.losses = loaded
        self.before, self.step, self.curve = state["before"], state["step"], list(state["curve"])
        self.t0 = time.time() - state["elapsed"]
        self.computation["fused_adamw"] = bool(self.opt.param_groups[0].get("fused"))     # as its checkpoint had it
        return True

    def say_preamble(self):
        """The derived quantities a run prints before it trains, in this order: its data, device, steps and warmup; how
        its steps are computed; what a cut run leaves out; the weights it starts from; and, where an interrupted run of
        these settings had gone further without keeping a checkpoint, the steps it repeats."""
        run, data, family, how = self.run, self.data, self.family, self.computation
        device, world, steps = run.device, run.processes.world, self.steps
        # the data and device, the encoded training set (its family's describe), the steps and warmup
        lines = [f"task {run.task}: {data.n_train} training examples, "
                 + ", ".join(f"{data.n_dev[k]} {k.replace('_', ' ')} examples" for k in data.devs) + f", device {device.type}"
                 + (f" x {world} processes (each takes 1/{world} of every batch)" if world > 1 else ""),
                 *family.describe(data.train),
                 f"batch {run.batch_size}, {run.epochs} epochs = {steps} steps, learning rate {run.lr}, warmup {self.warm} "
                 f"steps, weight decay {run.weight_decay}"]
        # how its steps are computed (computation_lines, below the class): '(also: AdamW fused, clip 1.0, ...)'
        lines += computation_lines(run, data, self.model, how)
        # what a cut run leaves out (and the flags that cut it), and how often it evaluates when that is not the recipe's
        cut = [f"{n} of {whole:,} {what} examples" for n, whole, what in [(data.n_train, data.n_train_all, "training")]
               + [(data.n_dev[k], data.n_dev_all[k], k.replace("_", " ")) for k in data.devs] if n < whole]
        if cut:
            lines.append(f"  (cut, not the paper's: the first {', the first '.join(cut)}; {', '.join(run.cut_by)})")
        if self.eval_every != eval_every(run.dev_evaluations, steps, cut=False):
            lines.append(f"  (a cut run: a dev evaluation every {self.eval_every} steps, "
                         f"{evaluations_made(steps, self.eval_every)} in all, not the recipe's {run.dev_evaluations}, "
                         f"which are for full runs; --evals sets them)")
        elif evaluations_made(steps, self.eval_every) < run.dev_evaluations:      # more asked than the run has steps
            lines.append(f"  ({run.dev_evaluations} dev evaluations asked, {steps} made: one at every step)")
        # the weight files it starts from (and the dtype they were saved in, where it is not the fp32 they are loaded
        # in), its output layer (a new one, the paper's, or the checkpoint's, kept), any warning its folder gave
        if run.init == "pretrained":
            layer = self.output_layer
            said = family.kept_head if layer.kept else family.new_head + (f" ({layer.note})" if layer.note else "")
            lines.append(weights_line(data.model_folder, said))
        reached = self.checkpoint.reached_before
        if reached:
            lines.append(f"(no checkpoint kept: the interrupted run had reached step {reached}/{steps}; started "
                         f"over, {reached} steps repeated)")
        for line in lines + list(data.model_folder.notes):
            self.log.say(line)

    def score_before(self):
        """The dev score of the untrained head (on the first process only; timed, for the cost line): the article's
        line, 'before fine-tuning (random classifier layer): dev accuracy 0.4908', with the task's other metrics after
        it (MRPC's F1), the training set's majority class as a baseline, and the article's number where it printed one."""
        run, family, data = self.run, self.family, self.data
        start = time.perf_counter()
        self.before = (family.evaluate(self.model, data.devs, data.tok, device=run.device, dtype=run.autocast_dtype)
                       if run.processes.is_main else None)
        self.evaluation_seconds = time.perf_counter() - start
        if run.init == "random":
            fresh = "every weight random, --init random"
        elif self.output_layer.kept:
            fresh = family.kept_head
        else:
            fresh = family.fresh
        scores = family.format(self.before) if run.processes.is_main else ""
        theirs = ""
        if run.task in ARTICLE_BEFORE and run.init == "pretrained" and not self.output_layer.kept:
            theirs = beside_article(ARTICLE_BEFORE[run.task], RANDOM_HEAD)
        self.log.say(f"before fine-tuning ({fresh}): {scores}" + family.baseline(data.majority, data.devs) + theirs)

    def time_and_say_cost(self):
        """What the run will cost here, said before its first step; then the training clock started. The cost: its steps
        times one step timed (the first batch's loss forward and back, its update left out; the RNG forked and the
        gradients cleared after: nothing of the run changes), its dev evaluations times the one before training, and
        its memory at the peak where it is large, as a range (this process's so far, after the step, with AdamW's two
        moments to come; up to `later` times that, for the wider batches and the allocator's leftovers of the steps
        after it)."""
        run = self.run
        _, batch, _ = next(self.batches())                                   # the first batch, as the loop gets it
        accelerators = [run.device] if run.device.type != "cpu" else []
        with torch.random.fork_rng(accelerators, device_type=run.device.type if accelerators else "cuda"):
            start = time.perf_counter()
            with autocast(run.device, run.autocast_dtype):
                self.family.loss(self.model, batch).backward()
            if run.device.type == "cuda":
                torch.cuda.synchronize(run.device)
            step_seconds = time.perf_counter() - start
        self.model.zero_grad(set_to_none=True)
        made = evaluations_made(self.steps, self.eval_every)          # the dev evaluations the run will make
        total = self.steps * step_seconds + made * self.evaluation_seconds
        peak = (torch.cuda.max_memory_allocated(run.device) if run.device.type == "cuda" else
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * RU_MAXRSS_UNIT)
        peak += ADAMW_MOMENTS * self.weight_bytes                                        # AdamW's two moments, to come
        # A range: the first batch's step, up to `later` times it, which a later batch wider than the first and what
        # the steps leave to the allocator take (measured on the CPU: the SQuAD stand-ins' peaks 1.13x and 1.3x this)
        later = 1.35
        memory = (f"; memory about {peak / 1e9:.1f} to {later * peak / 1e9:.1f} GB at its peak"
                  if peak >= LARGE_MEMORY else "")
        evaluations = f"{made} dev evaluation{'s' if made > 1 else ''}"
        self.log.say(f"cost here: {self.steps} steps x {step_seconds:.2f} s + {evaluations} x {self.evaluation_seconds:.1f} s = "
                     f"about {readable_time(total)} (one step and the evaluation before training timed on "
                     f"{run.device.type}{memory})")
        self.t0 = time.time()                                        # the training time starts at its first step

    # --- the loop: its batches, each step's loss, the dev scores, the checkpoint, the stop ---

    @contextmanager
    def stoppable(self):
        """While the loop runs: its progress bar, and SIGTERM (a cluster's notice before preemption) and Ctrl-C only
        raise a flag: the loop finishes its step, saves a checkpoint and stops (stop_or_save). Outside the main thread
        nothing is caught. After the loop, however it ended, the bar closed and the handlers as they were."""
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self.handlers[sig] = signal.signal(sig, self.caught)
        self.bar = tqdm(total=self.steps, initial=self.step, desc=self.run.name, unit="step", file=sys.stderr,
                        leave=False, disable=self.log.quiet)
        try:
            yield
        finally:
            self.bar.close()
            for sig, handler in self.handlers.items():
                signal.signal(sig, handler)

    def caught(self, signum, frame):
        self.received = signum

    def batches(self):
        """The paper's random batches of every epoch (grouped by length where the run says so), from the step the run
        stands at: (epoch, this process's rows of the batch on the device, their share: see shard). Each batch is made
        on the host, padded to its longest row (rounded up to a multiple of --pad-to-multiple-of: on CUDA by default),
        with where its real tokens lie for padding-free steps, then sent to the device (part4/data/batches.py
        to_device): no step waits for the device to learn its shape."""
        run, train = self.run, self.data.train
        lengths = train["full_lengths"] if run.grouped else None
        epochs = epoch_batches(len(train["input_ids"]), run.batch_size, run.epochs, run.seed, lengths=lengths)
        every_batch = [(epoch, idx) for epoch, in_epoch in enumerate(epochs, start=1) for idx in in_epoch]
        for epoch, idx in every_batch[self.step:]:
            rows, share = shard(idx, run.processes)
            batch = collate(train, rows, HOST, multiple=run.pad_to_multiple_of, max_width=run.max_len)
            yield epoch, to_device(with_real_tokens(batch) if run.padding_free_steps else batch, run.device), share

    def step_done(self, loss):
        """A step done: its loss kept (this process's share of the batch's mean loss, on the device until the next
        evaluation reads it), the step counted, the bar moved."""
        self.losses.append(loss / self.run.processes.world)
        self.step += 1
        self.bar.update()

    def score_dev(self, epoch):
        """The mean training loss since the last evaluation (summed over the processes: one sync per evaluation, not per
        step; a non-finite loss stops the run, naming its step) and the dev scores (on the first process), as one log
        line and a point of the curve; the step reached kept beside the checkpoint."""
        run = self.run
        window = summed(run.processes, torch.stack(self.losses).float())
        if not torch.isfinite(window).all():
            k = int((~torch.isfinite(window)).nonzero()[0])   # the first bad loss since the last line
            raise Fatal(f"the training loss became {window[k].item()} at step {self.step - len(self.losses) + 1 + k} "
                        f"(lr {run.lr}): stopped, no results written", code=1)
        self.losses, mean = [], window.mean().item()
        scores = (self.family.evaluate(self.model, self.data.devs, self.data.tok, device=run.device, dtype=run.autocast_dtype)
                  if run.processes.is_main else None)
        seconds = time.time() - self.t0
        self.curve.append({"step": self.step, "epoch": epoch, "train_loss": mean, "dev": scores, "seconds": round(seconds, 1)})
        shown = self.family.format(scores) if run.processes.is_main else ""
        self.log.say(f"step {self.step:>5}/{self.steps}  epoch {epoch}  train loss {mean:.4f}  {shown}  ({seconds:.0f} s)")
        self.checkpoint.keep_step_reached(self.step)

    def stop_or_save(self):
        """(stop, save), alike on every process (a checkpoint gathers from all of them): stop when any process received
        a signal; save when stopping, or after a dev evaluation before the last once --checkpoint-every has passed
        since the last checkpoint (or the run's start) on the first process's clock. Alone, no collective and nothing
        read from the device; under torchrun one all_reduce of these two flags at every step."""
        run = self.run
        stop = self.received is not None
        due = (self.step % self.eval_every == 0 and self.step < self.steps and run.processes.is_main
               and monotonic() - self.saved_at >= self.checkpoint_every)
        if run.processes.world > 1:
            flags = summed(run.processes, torch.tensor([float(stop), float(due)], device=run.device))
            stop, due = (bool(x) for x in (flags > 0).tolist())
        return stop, stop or due

    def save_checkpoint(self, stopping):
        """The checkpoint of the run as it stands, with its log lines and the line that says so, then that line (its
        path as the results folder was given, as the 'written:' line). The clock to the next checkpoint starts when it
        is written."""
        where = f"(checkpoint at step {self.step}/{self.steps}: {self.checkpoint.path}"
        every = self.checkpoint_every
        said = where + ("; the run stops)" if stopping else
                        ("" if math.isinf(every) else f"; the next after {shown_duration(every)} at the earliest") + ")")
        state = {"settings": self.run.recorded, "step": self.step, "curve": self.curve, "before": self.before,
                 "lines": [*self.log.lines, said], "elapsed": time.time() - self.t0}
        self.checkpoint.write_checkpoint(self.model, self.opt, self.sched, state, losses=self.losses)
        self.saved_at = monotonic()
        self.log.say(said)

    def stop(self):
        """Stop the run after a signal (its checkpoint saved): one line saying how to resume."""
        signal_name, code = STOP_SIGNALS.get(self.received, ("a signal to another process", 143))
        raise Stopped(f"stopped by {signal_name} at step {self.step}/{self.steps}: checkpoint saved to "
                      f"{portable(self.checkpoint.path)}; run the same command again to resume (no results were "
                      f"written)", code)

    # --- the end: the FINAL line and the results saved ---

    def final_results(self):
        """The FINAL line (the model at the end of training), the best dev score seen beside it (best_seen; never taken
        for the result), and the results saved: the JSON and log (steps, warmup steps, scores before and after, curve
        and seconds; where it ran, its settings and computation), the model kept when asked, the task's own outputs
        (its family's extra_outputs: GLUE's test-set predictions with --glue-submission), the checkpoint removed and the
        learning curve drawn. Returns the results on the first of the processes that share the run, None on the
        others."""
        run, family, log, curve = self.run, self.family, self.log, self.curve
        if not run.processes.is_main:
            return None
        seconds, final = time.time() - self.t0, curve[-1]["dev"]
        log.say(final_line(run.task, family, run, final=final, seconds=seconds, init=run.init))   # run: its Job's fields
        best = best_seen(curve, family)
        if family.selection(best["dev"]) > family.selection(final):     # said beside the result, never taken for it
            log.say(f"(best dev {family.selection_name} seen during training: {family.selection(best['dev']):.4f} "
                    f"at step {best['step']}; not the result: the result is the model at the end of training, since "
                    f"picking the best checkpoint by its dev score would flatter the dev score)")
        result = {"name": run.name, "task": run.task, "model": portable(run.model), "lr": run.lr,
                  "batch_size": run.batch_size, "epochs": run.epochs, "steps": self.steps, "warmup_steps": self.warm,
                  "seed": run.seed, "device": str(run.device), "before": self.before, "final": final, "curve": curve,
                  "best_during_training": {"step": best["step"], "dev": best["dev"]}, "seconds": seconds,
                  "train_examples": self.data.n_train, "train_rows": run.train_rows, "settings": run.recorded,
                  "weights": loaded_record(self.data.model_folder, self.output_layer) if run.init == "pretrained" else None,
                  "computation": self.computation}
        if run.saved_model:
            result["saved_model"] = portable(save_model_folder(self.model, self.data.tok, run.saved_model,
                                                               self.checkpoint.kept(), saved_by=run))
            log.say(f"model saved to {result['saved_model']} (config, safetensors weights, tokenizer)")
        result |= family.extra_outputs(self, run.test_dir)
        log.save(result, cli=command_line(run.argv, run.flags), device=run.device)   # its paths as they stand now
        self.checkpoint.remove()
        line_plot(os.path.join(run.results_dir, run.name + "_curve.png"), [p["step"] for p in curve],
                  {"train loss": [p["train_loss"] for p in curve]}, "step",
                  right=("dev score", [family.selection(p["dev"]) for p in curve]))
        return result


def best_seen(curve, family):
    """The evaluation with the best dev score in Table 1's metric (MCC for CoLA, F1 for MRPC, Spearman for STS-B),
    the first of any ties: reported beside the result, never taken for it."""
    return max(curve, key=lambda c: family.selection(c["dev"]))


def save_model_folder(model, tok, path, kept="", saved_by=None):
    """save_pretrained into a temporary folder beside path, then rename: never half a model folder (one that cannot be
    written is one line, ending with kept). saved_by: the run that saves it (a RunSettings), its name and settings
    written beside the model (run_files.SAVED_BY), by which a run of the same settings may replace it."""
    def write(tmp):
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        if saved_by is not None:
            with open(os.path.join(tmp, SAVED_BY), "w", encoding="utf-8") as f:
                json.dump({"name": saved_by.name, "settings": saved_by.recorded}, f, indent=1)
    return write_atomic(path, write, kept, folder=True)


# --- say_preamble's lines: how a run's steps are computed ---

def computation_lines(run, data, model, how):
    """How a run's steps are computed, as its results record it (how: TrainingRun.computation), in the preamble's
    words, then torch's AdamW beside the paper's optimiser: '(also: AdamW fused, clip 1.0, dropout 0.1, ...)'. A model
    the padding-free steps do not compute trains padded, and a line before it says why; widths rounded and cuDNN's
    attention where that is not the recipe's plain padded batches (nothing on the CPU by default); a flag that has no
    effect on this device says so; bf16 where the device emulates it (slow) says so after."""
    lines = []
    if run.asked["padding_free"] and not run.padding_free_steps:
        lines.append(f"padded steps, not padding-free: {data.padding_free_problem}")
    kernels = [f"widths rounded up to multiples of {run.pad_to_multiple_of} tokens"] if run.pad_to_multiple_of > 1 else []
    if run.device.type == "cuda":
        kernels.append("attention on cuDNN's kernels where SDPA picks them" if run.cudnn_attention
                       else "attention on SDPA's flash or memory-efficient kernels, not cuDNN's")
    elif run.asked["cudnn_attention"] is not None:
        kernels.append(f"--cudnn-attention has no effect on {run.device.type}: no cuDNN attention there")
    padding = ("padding-free steps (every layer but attention on the real tokens only"
               + (f"; dropout masks: {how['dropout_masks']}" if how["dropout_masks"] != MASKS_PADDED else "") + ")"
               if run.padding_free_steps else "dynamic padding")
    config = model.config
    lines += [f"  (also: AdamW{' fused' if how['fused_adamw'] else ''}, clip {run.clip}, "
              f"dropout {getattr(config, 'hidden_dropout_prob', getattr(config, 'dropout', None))}, seed {run.seed}, "
              f"autocast {DTYPE_NAMES[run.autocast_dtype] if run.autocast_dtype else 'off (fp32)'}, {padding}"
              + "".join(", " + k for k in kernels)
              + (", batches grouped by length (paper: random batches)" if run.grouped else "")
              + f"; model {portable(run.model)}{model_type_note(model)}"
              + (", random weights (--init random)" if run.init == "random" else "") + f", article: {ARTICLE_MODEL})",
              f"  (AdamW is torch's: eps 1e-8, bias-corrected moments; paper: {PAPER_OPTIMISER})"]
    if note := precision_note(run.device, run.autocast_dtype):
        lines.append(note)
    return lines


# --- the processes that share a run: each its rows of every batch, the model DDP-wrapped ---

def shard(idx, processes):
    """This process's rows of a global batch, and their share: the weight that makes the processes' mean gradients
    add up to the gradient of the whole batch's mean loss (DDP averages over processes): rows * processes / the batch's
    rows, 1 alone. A process left without a row (a last batch shorter than the number of processes) takes one with
    share 0."""
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


def final_line(task, family, job, final, seconds, init="pretrained"):
    """FINAL sst2 dev accuracy 0.9255 (807/872), dev F1 0.9279, training time 48.3 minutes, then the article's
    number for its setting only (batch 32, 3 epochs, seed 0, pre-trained; labelled with its model, which may not be
    ours) and the published ones, labelled. job: its learning rate, batch size, epochs and seed (a Job, or the
    RunSettings that holds them)."""
    line = f"FINAL {task} " + family.format(final, final=True) + f", training time {seconds / 60:.1f} minutes"
    article_run = article_setting(job, init)
    line += article_final(task, job.lr) if article_run else ""
    if task in GLUE and not (article_run and (task, job.lr) in ARTICLE_FINAL):
        ran = article_runs({t: GLUE[t].folder for t in GLUE})
        line += beside_article(f"no run with these settings (it ran {ran})")
    return line + "".join(f"   [{r}]" for r in family.references)
