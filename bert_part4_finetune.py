"""BERT, explained - Part 4: fine-tuning BERT with the paper's recipe (paper §3.2, §4.1-4.4, A.3).

    python bert_part4_finetune.py sst2            # the article's SST-2 run (lr 2e-5)
    python bert_part4_finetune.py mrpc 5e-5       # one MRPC learning rate; --grid glue runs all four
    python bert_part4_finetune.py rte --seeds 5   # five restarts, then mean and std
    python bert_part4_finetune.py squad --save-model models/squad      # SQuAD v1.1 (§4.2), keep the model
    python bert_part4_finetune.py squad_v2        # SQuAD v2.0 (§4.3);  swag: SWAG (§4.4)
    python bert_part4_finetune.py mrpc --model DIR --data-dir ../shared/data/glue_data   # offline
    python bert_part4_finetune.py glue            # every GLUE task, the best lr on dev, beside Table 1

One recipe for every task: AdamW with weight decay 0.01 (none on biases and LayerNorm weights), the
learning rate rising linearly over the first 10% of steps then falling linearly to zero (the article's
lambda; Google's run_classifier.py decays from step 0 instead, so its rate is 0.9 of the peak when warmup
ends), gradient clipping at 1.0, dropout 0.1, one fixed seed, batches padded to their own longest input (each
training step computed padding-free by default: every layer but attention on the real tokens only, the same run up
to float rounding; part4/packing.py).
A task brings only what differs: how it reads its data, how it encodes an example, its output layer and
its metric. Batch size and epochs default to the paper's for each task (GLUE 32 / 3, SQuAD v1.1 32 / 3,
SQuAD v2.0 48 / 2, SWAG 16 / 3), the learning rate to the paper's for SQuAD (5e-5) and SWAG (2e-5) and to
the article's 2e-5 for GLUE (paper: the best of 5e-5..2e-5 on dev; the glue command chooses so). Each run
writes results/part4_<task>_lr<lr>.{log,json}.
"""

import math
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass

import torch
from torch.optim.lr_scheduler import LambdaLR
from tqdm import tqdm
from transformers import AutoConfig

from part4 import cli, glue
from part4.article import (
    ARTICLE_BEFORE,
    ARTICLE_FINAL,
    ARTICLE_MODEL,
    ARTICLE_RUN,
    PAPER_OPTIMISER,
    article_final,
)
from part4.common import (
    ALONE,
    RANDOM_HEAD,
    Report,
    article,
    autocast,
    autocast_dtype,
    has_fused_adamw,
    line_plot,
    load_model,
    load_pretrained,
    model_type_note,
    portable,
    run_cli,
    seed_everything,
    start_processes,
)
from part4.packing import is_padding_free, padding_free, padding_free_problem
from part4.runs import (
    Fit,
    Job,
    Run,
    collate,
    epoch_batches,
    lr_tag,
    model_folders,
    run_command,
    run_name,
    run_settings,
    save_model,
    summary_name,
)
from part4.tasks import METRIC_NAMES
from part4.tasks import TASKS as GLUE_TASKS

# --- The fine-tuning settings: the paper's for each task (§4.1-4.4, A.3), and what the article printed ---

@dataclass(frozen=True)
class Recipe:
    lr: float
    batch_size: int
    epochs: int
    max_len: int
    evals: int             # dev evaluations per run; 0 = once per epoch


RECIPES = {**{name: Recipe(2e-5, 32, 3, 128, 30) for name in GLUE_TASKS},   # §4.1; lr and ~30 evaluations: the article's
           "squad": Recipe(5e-5, 32, 3, 384, 0),                            # §4.2; run_squad.py's 384-token windows
           "squad_v2": Recipe(5e-5, 48, 2, 384, 0),                         # §4.3
           "swag": Recipe(2e-5, 16, 3, 128, 0)}                             # §4.4

GRIDS = {"glue": [(32, lr, 3) for lr in (5e-5, 4e-5, 3e-5, 2e-5)],                       # paper §4.1
         "a3": [(b, lr, e) for b in (16, 32) for lr in (5e-5, 3e-5, 2e-5) for e in (2, 3, 4)]}   # paper A.3


def grid_size(name):
    """grid a3 (paper A.3): batch {16, 32} x lr {5e-5, 3e-5, 2e-5} x epochs {2, 3, 4} = 2 x 3 x 3 = 18 runs"""
    runs = GRIDS[name]
    axes = [sorted({r[k] for r in runs}, reverse=k == 1) for k in range(3)]
    named = [(n, [lr_tag(v) if n == "lr" else str(v) for v in a]) for n, a in zip(("batch", "lr", "epochs"), axes)
             if len(a) > 1]
    product = f" = {' x '.join(str(len(a)) for _, a in named)}" if len(named) > 1 else ""
    return (f"grid {name} ({'paper A.3' if name == 'a3' else 'paper §4.1'}): "
            + " x ".join(f"{n} {{{', '.join(a)}}}" for n, a in named) + f"{product} = {len(runs)} runs")


def article_setting(job, init):
    """Is this run in the setting the article's numbers are for (batch 32, 3 epochs, seed 0, pre-trained weights)?"""
    return (job.batch_size, job.epochs, job.seed) == ARTICLE_RUN and init == "pretrained"


# --- AdamW, no decay on biases and LayerNorm, warmup then linear decay (paper A.2, A.3) ---

def decay_groups(model, weight_decay):
    """Two parameter groups: everything else decays, the biases and the norm layers' weights do not. A norm layer is
    found by its type, whatever the model calls it (BERT's LayerNorm, DistilBERT's sa_layer_norm, an RMSNorm)."""
    decay, no_decay = [], []
    for module in model.modules():
        norm = any(re.search(r"Norm(\d+d)?$", cls.__name__) for cls in type(module).__mro__)
        for name, p in module.named_parameters(recurse=False):
            (no_decay if name == "bias" or norm else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def warmup_then_linear_decay(s, warm, steps):
    """The learning-rate factor at step s: rising to 1 over the warm steps, then falling linearly to 0 at the last
    step (0 after it). warm < steps, since the warmup share is below 1."""
    return s / warm if s < warm else max(0.0, (steps - s) / (steps - warm))


# --- The loss of each head family: the classification layer (§4.1), SQuAD's span (§4.2, §4.3), SWAG (§4.4) ---

def library_loss(model, batch):
    """GLUE and SWAG: the library's loss: cross-entropy over the labels (over the four endings for SWAG), the
    squared error for STS-B's one regression output."""
    return model(**batch).loss


def span_loss(model, batch):
    """SQuAD: -(log P_start(s) + log P_end(e)) / 2, each softmax over the window's own tokens.

    The paper sums the two log-likelihoods; run_squad.py averages them, as here. Padding is left out
    of the softmax, so a window's loss does not depend on how far its batch is padded."""
    targets = {k: batch[k] for k in ("start_positions", "end_positions")}
    out = model(**{k: v for k, v in batch.items() if k not in targets})
    mask = batch["attention_mask"].bool()
    start = out.start_logits.float().masked_fill(~mask, float("-inf"))    # S.T_i
    end = out.end_logits.float().masked_fill(~mask, float("-inf"))        # E.T_j
    return (torch.nn.functional.cross_entropy(start, targets["start_positions"])
            + torch.nn.functional.cross_entropy(end, targets["end_positions"])) / 2


LOSSES = {"classification": library_loss, "multiple_choice": library_loss, "span": span_loss}


# --- Our own fine-tune: SST-2 and MRPC on a laptop GPU (the article's lines, in its order; paper §3.2) ---

def new_model(family, config):
    """The model to fine-tune: the pre-trained weights with a new output layer (the paper), or with --init random
    the same architecture with every weight random (what pre-training buys, measured)."""
    if config.init == "random":            # the architecture its config names (the log says which, if not a BERT)
        return family.model_class.from_config(load_pretrained(AutoConfig, config.model, **family.model_kwargs))
    return load_model(family.model_class, config.model, **family.model_kwargs)[0]   # its loading report checked


def fine_tune(job, config, family, data, device, dtype, team=ALONE, quiet=False):
    """Train one model from the pre-trained weights, the article's lines in its order; returns the results of the run
    (on the team's rank 0). team: the processes that share this run, each taking its part of every batch."""
    name = run_name(config, job)
    report = Report(name, config.results_dir, quiet=quiet or not team.main)
    seed_everything(job.seed)
    model = new_model(family, config).to(device)    # e.g. BertForSequenceClassification.from_pretrained(model, num_labels=2)
    model = padding_free(model) if config.padding_free else model     # trains on the real tokens only: the same run
    model.train()
    train, wd = data["train"]["input_ids"], config.weight_decay
    fused = config.fused_adamw and has_fused_adamw(device)                      # the kernel, where torch has one
    groups = decay_groups(model, wd)
    opt = torch.optim.AdamW(groups, lr=job.lr, weight_decay=wd, fused=fused)    # no decay on biases and LayerNorm
    steps = job.epochs * math.ceil(len(train) / job.batch_size)    # the article's 3 * math.ceil(len(train) / 32)
    warm = int(config.warmup * steps)                                           # warmup, then linear decay
    # the article's LambdaLR(opt, lambda s: s / warm if s < warm else (steps - s) / (steps - warm)):
    sched = LambdaLR(opt, lambda s: warmup_then_linear_decay(s, warm, steps))
    run = Run(team, device, os.path.join(config.results_dir, name + ".checkpoint"),
              run_settings(config, job, family, len(train), dtype, team))
    fit = Fit(model, opt, sched, family, data, device, dtype, run, report)
    state = run.resumed(model, opt, sched, report, steps) or begin(fit, job, config, warm, steps)
    curve, seconds = train_loop(fit, job, config, state, steps)
    return finish(fit, job, config, state["before"], curve, steps, warm, seconds) if team.main else None


def train_loop(fit, job, config, state, steps):
    """The article's loop over the batches of every epoch, from the step the run stands at (state): a training step,
    the dev scores at each evaluation, a checkpoint. Returns the learning curve and the seconds (those of an
    interrupted run included)."""
    train, run, model, report = fit.data["train"], fit.run, fit.model, fit.report
    batches = [(epoch, idx) for epoch, in_epoch in enumerate(epoch_batches(
        len(train["input_ids"]), job.batch_size, job.epochs, job.seed, train["full_lengths"] if config.grouped else None),
        start=1) for idx in in_epoch]
    eval_every = max(1, steps // config.evals_of(job))
    ddp_model, step, t0 = run.wrap(model), state["step"], time.time() - state["elapsed"]   # DDP only under torchrun
    curve = list(state["curve"])
    loss_fn = LOSSES[fit.family.kind]
    with run, tqdm(total=steps, initial=step, desc=report.name, unit="step", file=sys.stderr, leave=False,
                   disable=report.quiet) as bar:
        for epoch, idx in batches[step:]:                              # every weight is trained
            rows, weight = run.share(idx)                              # all of the batch when alone
            loss = train_step(ddp_model, collate(train, rows, fit.device), fit.opt, fit.sched, config.clip, fit.dtype,
                              run.weighted(loss_fn, weight))
            run.add_loss(loss)
            step += 1
            bar.update()
            if step % eval_every == 0 or step == steps:
                curve.append(evaluation(fit, step, epoch, steps, job.lr, t0))
            run.after_step(step, steps, eval_every, model, fit.opt, fit.sched, {
                "curve": curve, "before": state["before"], "lines": list(report.lines), "elapsed": time.time() - t0})
    return curve, time.time() - t0


def train_step(model, batch, opt, sched, clip, dtype, loss_fn):
    """One step of the article's loop: forward, loss, backward, clip the gradient norm, AdamW, schedule.
    Returns the loss."""
    with autocast(batch["input_ids"].device, dtype):
        loss = loss_fn(model, batch)       # model(input_ids=ids, token_type_ids=tt, attention_mask=am, labels=y).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    sched.step()
    opt.zero_grad()
    return loss.detach()


def begin(fit, job, config, warm, steps):
    """A run from step 0: the preamble, then the score of the untrained head."""
    for line in preamble(config, fit, job, steps, warm):
        fit.report.say(line)
    main = fit.run.team.main
    before = fit.family.evaluate(fit.model, fit.data["devs"], fit.data["tok"], fit.device, fit.dtype) if main else None
    fresh = fit.family.fresh if config.init == "pretrained" else "every weight random, --init random"
    fit.report.say(f"before fine-tuning ({fresh}): {fit.family.format(before) if main else ''}"
                   + fit.family.baseline(fit.data["majority"], fit.data["devs"])
                   + (article(ARTICLE_BEFORE[config.task], RANDOM_HEAD) if config.task in ARTICLE_BEFORE and
                      config.init == "pretrained" else ""))
    return {"step": 0, "curve": [], "before": before, "elapsed": 0.0}


def evaluation(fit, step, epoch, steps, lr, t0):
    """The mean training loss since the last evaluation and the dev scores (on rank 0), as one log line."""
    mean = fit.run.mean_loss(step, lr)
    main = fit.run.team.main
    scores = fit.family.evaluate(fit.model, fit.data["devs"], fit.data["tok"], fit.device, fit.dtype) if main else None
    point = {"step": step, "epoch": epoch, "train_loss": mean, "dev": scores, "seconds": round(time.time() - t0, 1)}
    fit.report.say(f"step {step:>5}/{steps}  epoch {epoch}  train loss {mean:.4f}  "
                   f"{fit.family.format(scores) if main else ''}  ({time.time() - t0:.0f} s)")
    return point


def finish(fit, job, config, before, curve, steps, warm, seconds):
    """The FINAL line, the results JSON and log, the model kept when asked, and the learning curve."""
    family, report, final = fit.family, fit.report, curve[-1]["dev"]
    report.say(final_line(config.task, family, job, final, seconds, config.init))
    best = best_seen(curve, family)
    if family.selection(best["dev"]) > family.selection(final):
        report.say(f"(best dev {family.selection_name} seen during training: {family.selection(best['dev']):.4f} at step "
                   f"{best['step']}; not the result: the result is the model at the end of training, since picking the "
                   f"best checkpoint by its dev score would flatter the dev score)")
    result = {"name": report.name, "task": config.task, "model": portable(config.model), "lr": job.lr,
              "batch_size": job.batch_size, "epochs": job.epochs, "steps": steps, "warmup_steps": warm, "seed": job.seed,
              "device": str(fit.device), "before": before, "final": final, "curve": curve,
              "best_during_training": {"step": best["step"], "dev": best["dev"]}, "seconds": seconds,
              "train_examples": fit.data["n_train"], "train_rows": len(fit.data["train"]["input_ids"]),
              **family.summary(fit.data["train"]), "settings": fit.run.settings,
              "computation": computation(is_padding_free(fit.model), fit.opt)}
    if config.save_model:
        folder = model_folders(config, [job])[0]
        result["saved_model"] = portable(save_model(fit.model, fit.data["tok"], folder))
        report.say(f"model saved to {result['saved_model']} (config, safetensors weights, tokenizer)")
    if config.test_dir:                   # --glue-submission: this run's test-set predictions, for the chosen one
        result["test_predictions"] = glue.predict_tests(fit, config.test_dir, report)
    report.save(result, cli=config.cli, device=fit.device)
    fit.run.remove_checkpoint()
    line_plot(os.path.join(config.results_dir, report.name + "_curve.png"), [c["step"] for c in curve],
              {"train loss": [c["train_loss"] for c in curve]}, "step",
              right=("dev score", [family.selection(c["dev"]) for c in curve]))
    return result


def best_seen(curve, family):
    """The evaluation with the best dev score in Table 1's metric (MCC for CoLA, F1 for MRPC, Spearman for STS-B),
    the first of any ties: reported beside the result, never taken for it."""
    return max(curve, key=lambda c: family.selection(c["dev"]))


def computation(padding_free, opt):
    """How the run was computed, beside its settings (which decide its numbers): padding-free training steps or
    padded ones, AdamW's fused kernel or its loop of tensor operations."""
    return {"padding_free": padding_free, "fused_adamw": bool(opt.param_groups[0].get("fused"))}


def preamble(config, fit, job, steps, warm):
    """The derived quantities a run prints before it trains (STYLE 8): data, inputs cut, steps, warmup."""
    data, team, device = fit.data, fit.run.team, fit.device
    lines = [f"task {config.task}: {data['n_train']} training examples, "
             + ", ".join(f"{data['n_dev'][k]} {k.replace('_', ' ')} examples" for k in data["devs"])
             + f", device {device.type}"
             + (f" x {team.world} processes (each takes 1/{team.world} of every batch)" if team.world > 1 else "")]
    lines += fit.family.describe(data["train"])
    lines.append(f"batch {job.batch_size}, {job.epochs} epochs = {steps} steps, learning rate {job.lr}, warmup {warm} "
                 f"steps, weight decay {config.weight_decay}")
    packed, model = is_padding_free(fit.model), fit.model.config
    padding = "padding-free steps (every layer but attention on the real tokens only)" if packed else "dynamic padding"
    if config.padding_free and not packed:
        lines.append(f"padded steps, not padding-free: {padding_free_problem(fit.model)}")
    lines.append(f"  (also: AdamW{' fused' if computation(packed, fit.opt)['fused_adamw'] else ''}, clip "
                 f"{config.clip}, dropout {getattr(model, 'hidden_dropout_prob', getattr(model, 'dropout', None))}, "
                 f"seed {job.seed}, autocast "
                 f"{fit.dtype or 'off (fp32)'}, {padding}" + (", batches grouped by length (paper: random batches)"
                                                              if config.grouped else "")
                 + f"; model {portable(config.model)}{model_type_note(fit.model)}"
                 + (", random weights (--init random)" if config.init == "random" else "") + f", article: {ARTICLE_MODEL})")
    lines.append(f"  (AdamW is torch's: eps 1e-8, bias-corrected moments; paper: {PAPER_OPTIMISER})")
    cut = [f"{n} of {every:,} {what} examples" for n, every, what in [(data["n_train"], data["n_train_all"], "training")]
           + [(data["n_dev"][k], data["n_dev_all"][k], k.replace("_", " ")) for k in data["devs"]] if n < every]
    flags = [f for f, n in (("--max-train-examples", config.max_train_examples),
                            ("--max-dev-examples", config.max_dev_examples)) if n]
    return lines + ([f"  (cut, not the paper's: the first {', the first '.join(cut)}; {', '.join(flags)})"] if cut else [])


def final_line(task, family, job, final, seconds, init="pretrained"):
    """FINAL sst2 dev accuracy 0.9255 (807/872), dev F1 0.9279, training time 48.3 minutes, then the article's
    number for its setting only (batch 32, 3 epochs, seed 0, pre-trained; labelled with its model, which may not be
    ours) and the published ones, labelled."""
    line = f"FINAL {task} " + family.final(final) + f", training time {seconds / 60:.1f} minutes"
    article_run = article_setting(job, init)
    line += article_final(task, job.lr) if article_run else ""
    if task in GLUE_TASKS and not (article_run and (task, job.lr) in ARTICLE_FINAL):
        line += "   [article: no run with these settings (it ran SST-2 at lr 2e-5 and MRPC at 5e-5..2e-5, batch 32, 3 epochs)]"
    return line + "".join(f"   [{r}]" for r in family.references())


# --- Beyond one run: restarts over seeds (paper §5.2), and the paper's grids (§4.1, A.3) ---

def planned_runs(grid, seeds, seed, lr, batch_size, epochs):
    """The Job of every run this command asks for: the grid's settings (or the one given) with each seed. Grid glue
    varies the learning rate only, at the batch size and epochs given (the paper's 32 and 3 by default)."""
    seeds = range(seeds) if seeds else [seed]
    settings = ([(batch_size, grid_lr, epochs) for _, grid_lr, _ in GRIDS["glue"]] if grid == "glue"
                else GRIDS[grid] if grid else [(batch_size, lr, epochs)])
    return [Job(lr, b, e, s) for b, lr, e in settings for s in seeds]


def restarts(task, lr, seeds, family, results, report):
    """--seeds N: N runs with seeds 0..N-1, then the mean and std of every metric."""
    summary = {}
    for dev in results[0]["final"]:
        for m in family.metrics:
            values = [r["final"][dev][m] for r in results]
            summary[f"{dev}.{m}"] = {"values": values, "mean": statistics.mean(values),
                                     "std": statistics.stdev(values) if len(values) > 1 else 0.0}
            report.say(f"{task} lr {lr} over {len(values)} seeds: {dev} {METRIC_NAMES[m]} "
                       f"{summary[f'{dev}.{m}']['mean']:.4f} +- {summary[f'{dev}.{m}']['std']:.4f}  "
                       f"(values {', '.join(f'{v:.4f}' for v in values)})")
    return {"seeds": seeds, "runs": [r["name"] for r in results], "processes": [r["process"] for r in results],
            "summary": summary}


def grid(name, task, seeds, family, results, report, init="pretrained"):
    """--grid: every (batch, lr, epochs) of the grid, in a table sorted by the task's own metric (Table 1's: MCC for
    CoLA, F1 for MRPC and QQP, Spearman for STS-B); with --seeds, each setting's mean over the seeds first."""
    if seeds:
        report.say(f"grid {name} on {task}, mean +- std over {seeds} seeds, sorted by dev {family.selection_name} "
                   f"(paper, BERT-large: the best of several restarts on dev):")
        points = {}
        for r in results:
            points.setdefault((r["batch_size"], r["lr"], r["epochs"]), []).append(family.selection(r["final"]))
        for (b, lr, e), v in sorted(points.items(), key=lambda kv: -statistics.mean(kv[1])):
            report.say(f"  batch {b:>2}  lr {lr:<6g}  epochs {e}  {statistics.mean(v):.4f} +- "
                       f"{statistics.stdev(v) if len(v) > 1 else 0.0:.4f}")
    ranked = sorted(results, key=lambda r: -family.selection(r["final"]))
    report.say(f"grid {name} on {task}, sorted by dev {family.selection_name} (model at the end of training):")
    for r in ranked:
        article_run = article_setting(Job(r["lr"], r["batch_size"], r["epochs"], r["seed"]), init)
        report.say(f"  batch {r['batch_size']:>2}  lr {r['lr']:<6g}  epochs {r['epochs']}  {family.final(r['final'])}  "
                   f"({r['seconds']:.0f} s)" + (article_final(task, r["lr"]) if article_run else ""))
    return {"grid": name, "runs": [{k: r[k] for k in ("name", "lr", "batch_size", "epochs", "final", "process")}
                                   for r in ranked]}


def task_runs(config, family, sources, jobs, where, table_report=None):
    """Every run of one task (with --grid, --seeds or glue, those done are skipped), then the summary of --seeds or
    --grid; under glue, its lines go to the table's report and the table summarises. where: (device, dtype,
    processes). Returns the runs' results (on rank 0), the task's family and Config, and the data (its sizes and
    majority class)."""
    task, team, summarise = config.task, where[2], table_report is None and config.many
    report = table_report or Report(summary_name(config, config.grid, config.seeds, jobs[0]), config.results_dir,
                                    quiet=not team.main)
    header = [(f"{task}: " if table_report else "") + grid_size(config.grid)
              + (f", x {config.seeds} seeds = {len(jobs)} runs" if config.seeds else "")] if config.grid else []
    results, data = run_command(config, family, jobs, sources, fine_tune, where, config.parallel, report, header,
                                summarise)
    if summarise and team.main:
        payload = (grid(config.grid, task, config.seeds, family, results, report, config.init) if config.grid else
                   restarts(task, jobs[0].lr, config.seeds, family, results, report))
        report.save({"task": task, "model": portable(config.model), **payload}, cli=config.cli, device=where[0])
    return results, family, config, data


# --- The command line: the article's commands, every input checked before any work (part4/cli.py) ---

def build_parser():
    """The article's command line (part4/cli.py), the paper's settings of each task (RECIPES) its defaults."""
    return cli.build_parser(RECIPES, GRIDS, ARTICLE_MODEL, PAPER_OPTIMISER)


def parse_args(argv):
    """The article's command line as a Command, with the paper's settings of each task (RECIPES) as its defaults."""
    return cli.parse(argv, RECIPES, GRIDS, ARTICLE_MODEL, PAPER_OPTIMISER)


def main(argv=None):
    command = parse_args(argv)
    device, team = start_processes(*command.device_flags[:2])
    where = (device, autocast_dtype(device, command.device_flags[2]), team)
    jobs = planned_runs(command.grid, command.seeds, command.seed, command.lr, command.batch_size, command.epochs)
    if command.table is None:
        task_runs(*command.for_task(command.tasks[0]), jobs, where)
        return 0
    table = command.table       # every GLUE task, the learning rate chosen on dev, beside the paper's Table 1 (§4.1)
    to_run, absent = glue.runnable(table)
    report = glue.start(table, to_run, absent, team)
    rows = {}
    for t in to_run:
        results, family, config, data = task_runs(*command.for_task(t), jobs, where, report)
        rows[t] = glue.choose(results, family, config, data) if team.main else None
    if team.main:
        glue.finish(table, rows, absent, report, command.config.cli, device)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
