"""A run's checkpoint files, and only those: the checkpoint written (the model, the optimiser, the schedule, every
process's RNG states and unsummed losses, the run's state), read back to resume bitwise, refused when it is of other
settings; and the step the run has reached, kept beside it (a killed run resumed says how many steps it repeats). When
to write one is the run's (part4/run/training_run.py). A checkpoint holds tensors and plain values only: it loads with
weights_only."""

import json
import os
import random

import numpy as np
import torch

from part4.command_line.declarations import Fatal
from part4.command_line.fine_tune_settings import as_recorded_now, settings_diff
from part4.models.loading import gather
from part4.output.results_files import write_atomic

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


def save_atomic(obj, path, kept=""):
    """torch.save, written atomically (see write_atomic in part4/output/results_files.py): a checkpoint is whole or absent;
    one that cannot be written (no space left) is one line, ending with kept."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_atomic(path, lambda tmp: torch.save(obj, tmp), kept)


# --- the checkpoint of one run: written, read back, refused when of other settings ---

class Checkpoint:
    """The checkpoint file of one run (path: results/<run name>.checkpoint) of these settings, shared by the processes
    that train the run together (each keeps its own RNG states and losses in it) on device."""

    def __init__(self, path, settings, processes, device, again=""):
        self.path, self.settings, self.processes, self.device = path, settings, processes, device
        self.again, self.step_kept = again, None        # the command that resumes it; the step of the one on disk

    def write_checkpoint(self, model, opt, sched, state, *, losses):
        """Rank 0 writes the model, optimiser, schedule and state, with every process's unsummed losses (losses: this
        process's) and RNG states: what a resumed run needs to continue exactly where this one stands. Every process
        calls it (it gathers), alike on all of them."""
        everyone = gather(self.processes, {"losses": [float(x) for x in losses], "rng": rng_states()})
        if self.processes.is_main:
            save_atomic({"state": plain(state), "model": model.state_dict(), "opt": opt.state_dict(),
                         "sched": sched.state_dict(), "processes": everyone}, self.path, self.kept())
            self.step_kept = state["step"]

    def kept(self):
        """What a run keeps when a write fails, and the command that goes on, as the end of its one line."""
        kept = ("no checkpoint yet: the run starts over" if self.step_kept is None else
                f"the checkpoint at step {self.step_kept} is kept")
        return f"; {kept}; to resume once there is room: {self.again or 'run the same command again'}"

    def resume(self, model, opt, sched):
        """None when there is no checkpoint; else (its state, this process's unsummed losses on the run's device), after
        loading the model, optimiser, schedule and this process's RNG states. A checkpoint of other settings is
        refused."""
        path = self.path
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
        self.step_kept = ckpt["state"]["step"]
        return ckpt["state"], [torch.tensor(x, device=self.device) for x in mine["losses"]]   # beside the losses to come

    def resumed(self, model, opt, sched, *, report, steps):
        """(state, losses) when a checkpoint was loaded (its log lines restored, and a line saying so, with the steps
        it repeats where the interrupted run went past it), else None."""
        loaded = self.resume(model, opt, sched)
        if loaded:
            state = loaded[0]
            report.say_again(state["lines"])
            step, reached = state["step"], self.reached_before()
            repeated = (f"; it had reached step {reached}: {reached - step} steps repeated"
                        if reached is not None and reached > step else "")
            report.say(f"(resumed from {self.path} at step {step}/{steps}: the lines above come from "
                       f"the interrupted run{repeated})")
        return loaded

    # --- the step reached, kept beside the checkpoint: what a run resumed from an older checkpoint repeats ---

    @property
    def progress(self):
        """results/<run name>.progress, beside the checkpoint: {"step", "settings"}, the step the run last reached."""
        return os.path.splitext(self.path)[0] + ".progress"

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

    def started_over(self, steps):
        """The line of a run started from step 0 where an interrupted run of the same settings had gone further
        without keeping a checkpoint ([] where none had)."""
        reached = self.reached_before()
        if not reached:
            return []
        return [f"(no checkpoint kept: the interrupted run had reached step {reached}/{steps}; started over, "
                f"{reached} steps repeated)"]

    def remove(self):
        """The checkpoint and its step reached removed: the results are written, the checkpoint is spent."""
        for path in (self.path, self.progress):
            if os.path.exists(path):
                os.remove(path)
