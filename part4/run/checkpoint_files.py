"""Checkpoints and resume: what one training run needs around its loop that the paper does not say. The Run shares
each batch among the processes torchrun started, sums the loss over them, stops on a non-finite loss, writes a
checkpoint at an evaluation once --checkpoint-every has passed and resumes from it bitwise (the model, the optimiser,
the schedule and every RNG), keeps the step it has reached beside it (a killed run resumed says how many steps it
repeats), and stops cleanly on SIGTERM or Ctrl-C, with a checkpoint. A checkpoint holds tensors and plain values
only: it loads with weights_only."""

import json
import math
import os
import random
import signal
import sys
import threading
from time import monotonic

import numpy as np
import torch

from part4.command_line.declarations import shown_duration
from part4.command_line.errors import Fatal, Stopped, not_a_script
from part4.command_line.fine_tune_settings import as_recorded_now, settings_diff
from part4.models.devices import WithoutCudnnAttention, gather, summed
from part4.output.results_files import portable, replace_atomically, write_atomic

# --- the RNG states and the checkpoint file: tensors and plain values only ---

def rng_states():
    """The Python, numpy and torch RNG states as tensors and plain values only, so that a checkpoint loads with
    torch.load(..., weights_only=True): nothing in it can run code."""
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    states = {"python": [version, list(internal), gauss],
              "numpy": [name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
              "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states):
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = states["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def plain(obj):
    """obj with numpy scalars and arrays turned into Python numbers and lists (tensors kept): what
    torch.load(..., weights_only=True) reads back without unpickling any other class."""
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, (np.generic, np.ndarray)):
        return obj.tolist()
    return obj


def save_atomic(obj, path):
    """torch.save, written atomically (see write_atomic in part4/output/results_files.py): a checkpoint is whole or absent."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    replace_atomically(path, lambda tmp: torch.save(obj, tmp))


# --- the Run around one training loop, and the signals that stop it cleanly ---

class StopSignals:
    """While active, SIGTERM (a cluster's notice before preemption) and Ctrl-C only raise a flag: the loop
    finishes its step, saves a checkpoint and stops. Outside the main thread it does nothing."""

    NAMES = {signal.SIGINT: ("Ctrl-C", 130), signal.SIGTERM: ("SIGTERM", 143)}

    def __init__(self):
        self.received, self.saved = None, {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in self.NAMES:
                self.saved[sig] = signal.signal(sig, self._catch)
        return self

    def _catch(self, signum, frame):
        self.received = signum

    def __exit__(self, *exc):
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
        return False


class Run:
    """Everything around one training loop that is not the recipe: the processes that share it (each takes its
    part of every batch), the loss summed over them, the check for a non-finite loss, the checkpoint written at an
    evaluation at most every `every` seconds (--checkpoint-every) and read back on a rerun, the step reached kept
    beside it, and a clean stop on SIGTERM or Ctrl-C (used as a context manager)."""

    def __init__(self, processes, device, checkpoint, settings, every=math.inf):
        self.processes, self.device, self.checkpoint, self.settings = processes, device, checkpoint, settings
        self.every, self.saved_at = every, monotonic()      # the clock starts with the run (or its resumption)
        self.losses, self.stop = [], StopSignals()

    def __enter__(self):
        self.stop.__enter__()
        return self

    def __exit__(self, *exc):
        return self.stop.__exit__(*exc)

    def wrap(self, model, cudnn_attention=True):
        """The model each step trains through: itself alone, DistributedDataParallel across several processes; on
        CUDA without cudnn_attention, called with cuDNN's attention kernels left out (part4/models/devices.py
        WithoutCudnnAttention). Elsewhere there is no cuDNN attention: the model as it is."""
        net = model
        if self.processes.world > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            net = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
        if self.device.type == "cuda" and not cudnn_attention:
            net = WithoutCudnnAttention(net)
        return net

    def share(self, idx):
        """This process's rows of a global batch, and the weight of its loss (see shard)."""
        return shard(idx, self.processes)

    def add_loss(self, loss):
        """loss: this process's loss times its weight (see shard); its share of the batch's mean loss is kept."""
        self.losses.append(loss / self.processes.world)

    def mean_loss(self, step, lr):
        """The mean training loss since the last call, summed over the processes (one sync per evaluation, not per
        step); a non-finite loss stops the run, naming its step."""
        window = summed(self.processes, torch.stack(self.losses).float())
        if not torch.isfinite(window).all():
            k = int((~torch.isfinite(window)).nonzero()[0])   # the first bad loss since the last line
            raise Fatal(f"the training loss became {window[k].item()} at step {step - len(self.losses) + 1 + k} "
                        f"(lr {lr}): stopped, no results written", code=1)
        self.losses = []
        return window.mean().item()

    def decide(self, evaluated):
        """After a step, decided alike on every process (save() gathers from all of them): (stop, save). stop: has any
        process received SIGTERM or Ctrl-C? save: a checkpoint now, when stopping, or after a dev evaluation before the
        last (evaluated) once `every` seconds have passed since the last checkpoint (or the run's start) on the first
        process's clock. Alone, no collective and nothing read from the device; under torchrun one all_reduce of
        these two flags, the one the stop check makes at every step."""
        stop = self.stop.received is not None
        due = evaluated and self.processes.is_main and monotonic() - self.saved_at >= self.every
        if self.processes.world > 1:
            flags = summed(self.processes, torch.tensor([float(stop), float(due)], device=self.device))
            stop, due = (bool(x) for x in (flags > 0).tolist())
        return stop, stop or due

    def stopped(self, step, total):
        """Stop the run after a signal (its checkpoint saved): one line saying how to resume."""
        signal_name, code = StopSignals.NAMES.get(self.stop.received, ("a signal to another process", 143))
        raise Stopped(f"stopped by {signal_name} at step {step}/{total}: checkpoint saved to "
                      f"{portable(self.checkpoint)}; run the same command again to resume (no results were written)",
                      code)

    def write_checkpoint(self, model, opt, sched, state):
        """Rank 0 writes the model, optimiser, schedule and state, with every process's unsummed losses and RNG
        states: what a resumed run needs to continue exactly where this one stands. Every process calls it (it
        gathers): decide says when, alike on all of them. The clock to the next checkpoint starts when it is
        written."""
        everyone = gather(self.processes, {"losses": [float(x) for x in self.losses], "rng": rng_states()})
        if self.processes.is_main:
            save_atomic({"state": plain(state), "model": model.state_dict(), "opt": opt.state_dict(),
                         "sched": sched.state_dict(), "processes": everyone}, self.checkpoint)
        self.saved_at = monotonic()

    def saved_line(self, step, total, stopping=False):
        """The log line of a checkpoint written (its path as the results folder was given, as the 'written:' line)."""
        if stopping:
            return f"(checkpoint at step {step}/{total}: {self.checkpoint}; the run stops)"
        every = "" if math.isinf(self.every) else f"; the next after {shown_duration(self.every)} at the earliest"
        return f"(checkpoint at step {step}/{total}: {self.checkpoint}{every})"

    # --- the step reached, kept beside the checkpoint: what a run resumed from an older checkpoint repeats ---

    @property
    def progress(self):
        """results/<run name>.progress, beside the checkpoint: {"step", "settings"}, the step the run last reached."""
        return os.path.splitext(self.checkpoint)[0] + ".progress"

    def reached(self, step):
        """Keep the step the run has reached (at each dev evaluation; a few bytes, written atomically by the first
        process), so that a run killed past its last checkpoint says, resumed, how many steps it repeats."""
        if self.processes.is_main:
            os.makedirs(os.path.dirname(os.path.abspath(self.progress)), exist_ok=True)
            write_atomic(self.progress, json.dumps({"step": step, "settings": self.settings}) + "\n")

    def reached_before(self):
        """The step an interrupted run of these settings had reached (its .progress), or None: none kept, unreadable
        (it is only a note), or another run's settings."""
        try:
            with open(self.progress, encoding="utf-8") as f:
                kept = json.load(f)
            step = int(kept["step"])
        except (OSError, ValueError, TypeError, KeyError):
            return None
        return step if as_recorded_now(kept.get("settings")) == as_recorded_now(self.settings) else None

    def resumed(self, model, opt, sched, *, report, steps):
        """The saved state when a checkpoint was loaded (its log lines restored, and a line saying so, with the steps
        it repeats where the interrupted run went past it), else None."""
        state = self.resume(model, opt, sched)
        if state:
            report.say_again(state["lines"])
            step, reached = state["step"], self.reached_before()
            repeated = (f"; it had reached step {reached}: {reached - step} steps repeated"
                        if reached is not None and reached > step else "")
            report.say(f"(resumed from {self.checkpoint} at step {step}/{steps}: the lines above come from "
                       f"the interrupted run{repeated})")
        return state

    def started_over(self, steps):
        """The line of a run started from step 0 where an interrupted run of the same settings had gone further
        without keeping a checkpoint ([] where none had)."""
        reached = self.reached_before()
        if not reached:
            return []
        return [f"(no checkpoint kept: the interrupted run had reached step {reached}/{steps}; started over, "
                f"{reached} steps repeated)"]

    def resume(self, model, opt, sched):
        """None when there is no checkpoint; else its state, after loading the model, optimiser, schedule, this
        process's losses and RNG states. A checkpoint of other settings is refused."""
        path = self.checkpoint
        if not os.path.isfile(path):
            return None
        try:      # weights_only: a planted pickle is refused before anything in it can run
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
            saved = ckpt["state"]["settings"]
        except Exception as e:  # a truncated, foreign or code-carrying file: torch raises many kinds
            raise Fatal(f"{path}: not a checkpoint of this script ({type(e).__name__}); nothing in it was run; "
                        f"delete it to start over")
        saved, ours = as_recorded_now(saved), as_recorded_now(self.settings)
        if saved != ours:
            raise Fatal(f"{path}: a checkpoint from other settings ({settings_diff(saved, ours)}): refusing to "
                        f"resume from it; delete it to start this run over")
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])          # its AdamW kernel (fused or not) comes with it: recorded as computed
        sched.load_state_dict(ckpt["sched"])
        mine = ckpt["processes"][self.processes.rank]
        set_rng_states(mine["rng"])
        self.losses = [torch.tensor(x, device=self.device) for x in mine["losses"]]   # beside the losses to come
        return ckpt["state"]

    def remove_checkpoint(self):
        for path in (self.checkpoint, self.progress):  # the results are written: the checkpoint is spent
            if os.path.exists(path):
                os.remove(path)


def shard(idx, processes):
    """This process's rows of a global batch, and the weight that makes the processes' mean gradients add up to
    the gradient of the whole batch's mean loss (DDP averages over processes). A process left without a row (a
    last batch shorter than the number of processes) takes one with weight 0."""
    rows = np.array_split(np.asarray(idx), processes.world)[processes.rank].tolist()
    if not rows:
        return idx[:1], 0.0
    return rows, len(rows) * processes.world / len(idx)


if __name__ == "__main__":
    sys.exit(not_a_script("part4/run/checkpoint_files.py", "python bert_part4_finetune.py (--help lists its flags)"))
