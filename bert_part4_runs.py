"""The machinery of training runs, and nothing of any experiment.

What a training loop needs around it, each piece one call away: batches padded to their own longest row
and batches grouped by length; a Run that shares each batch among the processes torchrun started, sums the
loss over them, stops on a non-finite loss, checkpoints and resumes bitwise, and stops cleanly on SIGTERM or
Ctrl-C; run_many for grids, seeds and parallel runs, skipping what is already done.
"""

import json
import os
import random
import signal
import threading

import numpy as np
import torch

from bert_part4_common import ALONE, Fatal, Stopped, gather, portable, replace_atomically, summed

# --- batches: padded to their own longest row (dynamic padding), grouped by length ---


def padded(rows, length=None, value=0, dtype=torch.long):
    """Rows of different lengths as one (len(rows), length) tensor, each padded at its end with value
    (length: the longest row, unless given)."""
    L = length or max(len(r) for r in rows)
    out = torch.full((len(rows), L), value, dtype=dtype)
    for r, x in enumerate(rows):
        out[r, :len(x)] = torch.tensor(x, dtype=dtype)
    return out


def collate(enc, idx, device, pad_to=None, pad_id=0):
    """A batch of the rows idx of an encoded set (a dict of columns), padded to the longest of them (or to pad_to).
    Rows that hold several inputs each (SWAG's four) make (batch, inputs, tokens) tensors; enc["targets"] names
    the columns that are the training targets."""
    rows = [enc["input_ids"][i] for i in idx]
    types = [enc["token_type_ids"][i] for i in idx]
    choices = isinstance(rows[0][0], list)
    if choices:
        rows, types = [r for row in rows for r in row], [t for row in types for t in row]
    L = pad_to or max(len(r) for r in rows)
    batch = {"input_ids": padded(rows, L, pad_id), "token_type_ids": padded(types, L),
             "attention_mask": padded([[1] * len(r) for r in rows], L)}
    if choices:
        batch = {k: v.view(len(idx), -1, L) for k, v in batch.items()}
    for key in enc["targets"]:
        batch[key] = torch.tensor([enc[key][i] for i in idx])
    return {k: v.to(device) for k, v in batch.items()}


def batches_by_length(lengths, batch_size):
    """Rows sorted by length, cut into batches: each batch carries little padding (for evaluation)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def epoch_batches(n, batch_size, epochs, seed, lengths=None, group=50):
    """The shuffled row order of every epoch, cut into batches (the last one of an epoch may be short).

    With lengths: each run of group * batch_size shuffled rows is sorted by length before it is cut, and
    the batches of the epoch are then shuffled, so that a batch holds rows of similar length."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(epochs):
        order = torch.randperm(n, generator=g).tolist()
        if lengths is not None:
            chunk = group * batch_size
            order = [i for c in range(0, n, chunk) for i in sorted(order[c:c + chunk], key=lambda i: lengths[i])]
        batches = [order[i:i + batch_size] for i in range(0, n, batch_size)]
        if lengths is not None:
            batches = [batches[k] for k in torch.randperm(len(batches), generator=g).tolist()]
        out.append(batches)
    return out


# --- checkpoints: tensors and plain values only, and the signals that stop a long run cleanly ---

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
    """torch.save, written atomically (see write_atomic in bert_part4_common): a checkpoint is whole or absent."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    replace_atomically(path, lambda tmp: torch.save(obj, tmp))


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
    part of every batch), the loss summed over them, the check for a non-finite loss, the checkpoint written at
    each evaluation and read back on a rerun, and a clean stop on SIGTERM or Ctrl-C (used as a context manager)."""

    def __init__(self, team, device, checkpoint, settings):
        self.team, self.device, self.checkpoint, self.settings = team, device, checkpoint, settings
        self.losses, self.stop = [], StopSignals()

    def __enter__(self):
        self.stop.__enter__()
        return self

    def __exit__(self, *exc):
        return self.stop.__exit__(*exc)

    def wrap(self, model):
        """The model each step trains through: itself alone, DistributedDataParallel within a team."""
        if self.team.world == 1:
            return model
        ids = [self.device.index] if self.device.type == "cuda" else None
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)

    def share(self, idx):
        """This process's rows of a global batch, and the weight of its loss (see shard)."""
        return shard(idx, self.team)

    def add_loss(self, loss, weight):
        self.losses.append(loss * weight / self.team.world)    # this process's share of the batch's mean loss

    def mean_loss(self, step, lr):
        """The mean training loss since the last call, summed over the processes (one sync per evaluation, not per
        step); a non-finite loss stops the run, naming its step."""
        window = summed(self.team, torch.stack(self.losses).float())
        if not torch.isfinite(window).all():
            k = int((~torch.isfinite(window)).nonzero()[0])   # the first bad loss since the last line
            raise Fatal(f"the training loss became {window[k].item()} at step {step - len(self.losses) + 1 + k} "
                        f"(lr {lr}): stopped, no results written", code=1)
        self.losses = []
        return window.mean().item()

    def stop_requested(self):
        """Has any process of the team received SIGTERM or Ctrl-C? (All of them stop at the same step.)"""
        if self.team.world == 1:
            return self.stop.received is not None
        flag = torch.tensor([float(self.stop.received is not None)], device=self.device)
        return bool(summed(self.team, flag).item() > 0)

    def after_step(self, step, total, every, model, opt, sched, state):
        """A checkpoint at each evaluation before the last; on SIGTERM or Ctrl-C a checkpoint, then Stopped."""
        stopping = self.stop_requested()
        if stopping or (step % every == 0 and step < total):
            self.save(model, opt, sched, {"settings": self.settings, "step": step, **state})
        if stopping:
            signal_name, code = StopSignals.NAMES.get(self.stop.received, ("a signal to another process", 143))
            raise Stopped(f"stopped by {signal_name} at step {step}/{total}: checkpoint saved to "
                          f"{portable(self.checkpoint)}; run the same command again to resume (no results were written)",
                          code)

    def save(self, model, opt, sched, state):
        """Rank 0 writes the model, optimiser, schedule and state, with every process's unsummed losses and RNG
        states: what a resumed run needs to continue exactly where this one stands."""
        everyone = gather(self.team, {"losses": [float(x) for x in self.losses], "rng": rng_states()})
        if self.team.main:
            save_atomic({"state": plain(state), "model": model.state_dict(), "opt": opt.state_dict(),
                         "sched": sched.state_dict(), "processes": everyone}, self.checkpoint)

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
        if saved != self.settings:
            diff = [f"{k} {saved.get(k)!r} -> {v!r}" for k, v in self.settings.items() if saved.get(k) != v]
            raise Fatal(f"{path}: a checkpoint from other settings ({'; '.join(diff)}): refusing to resume from it; "
                        f"delete it to start this run over")
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])
        sched.load_state_dict(ckpt["sched"])
        mine = ckpt["processes"][self.team.rank]
        set_rng_states(mine["rng"])
        self.losses = [torch.tensor(x) for x in mine["losses"]]
        return ckpt["state"]

    def finish(self):
        if os.path.exists(self.checkpoint):
            os.remove(self.checkpoint)                 # the results are written: the checkpoint is spent


def shard(idx, team):
    """This process's rows of a global batch, and the weight that makes the processes' mean gradients add up to
    the gradient of the whole batch's mean loss (DDP averages over processes). A process left without a row (a
    last batch shorter than the number of processes) takes one with weight 0."""
    rows = np.array_split(np.asarray(idx), team.world)[team.rank].tolist()
    if not rows:
        return idx[:1], 0.0
    return rows, len(rows) * team.world / len(idx)


# --- many runs: grids, seeds, and whole runs spread over processes ---

def existing_result(path, settings, ignore=("processes",)):
    """The results JSON at path when it exists for the same settings (keys in ignore aside), else None."""
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        done = json.load(f)

    def same(s):
        return {k: v for k, v in s.items() if k not in ignore}

    return done if same(done.get("settings", {})) == same(settings) else None


def run_many(items, run_one, done, procs, mode):
    """run_one(item, team) for every item, or done(item) where that returns an earlier result (marked skipped).
    mode "runs": item k is run by process k % N alone; mode "data": each by all the processes together. Returns
    the results in order on rank 0 (None elsewhere)."""
    mine = {}
    for k, item in enumerate(items):
        if mode == "runs" and k % procs.world != procs.rank:
            continue
        earlier = done(item)
        result = {**earlier, "skipped": True} if earlier else run_one(item, procs if mode == "data" else ALONE)
        if result is not None:                       # data mode: only rank 0 holds the results
            mine[k] = {**result, "process": procs.rank}
    if mode == "runs":
        mine = {k: r for part in gather(procs, mine) for k, r in part.items()}
    return [mine[k] for k in range(len(items))] if procs.main else None


def work_split(parallel, many, procs, batch_sizes):
    """How the processes share the work: "data" (every batch split over them) or "runs" (whole runs each)."""
    if parallel and not procs.launched:
        raise Fatal(f"--parallel {parallel}: needs several processes started by torchrun "
                    f"(torchrun --nproc-per-node N bert_part4_finetune.py ...)")
    if parallel == "runs" and not many:
        raise Fatal("--parallel runs spreads whole runs over the processes: it needs --grid or --seeds "
                    "(one run: --parallel data)")
    mode = parallel or ("runs" if many else "data")
    if mode == "data":
        for batch in sorted(set(batch_sizes)):
            if batch % procs.world:
                raise Fatal(f"batch {batch} cannot be split over {procs.world} processes: choose a batch size divisible "
                            f"by {procs.world} (the global batch stays the paper's; each process takes batch / N)")
    return mode


def split_line(mode, procs, n_runs):
    if mode == "data":
        return (f"work split: {procs.world} processes ({procs.backend}), data parallel: each of the {n_runs} run(s) "
                f"uses every process, each taking 1/{procs.world} of every batch")
    return (f"work split: {procs.world} processes ({procs.backend}), whole runs: process r trains runs r, r + "
            f"{procs.world}, ... of the {n_runs}, each alone on its own device")
