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
to float rounding; bert_part4_packing.py).
A task brings only what differs: how it reads its data, how it encodes an example, its output layer and
its metric. Batch size and epochs default to the paper's for each task (GLUE 32 / 3, SQuAD v1.1 32 / 3,
SQuAD v2.0 48 / 2, SWAG 16 / 3), the learning rate to the paper's for SQuAD (5e-5) and SWAG (2e-5) and to
the article's 2e-5 for GLUE (paper: the best of 5e-5..2e-5 on dev; the glue command chooses so). Each run
writes results/part4_<task>_lr<lr>.{log,json}.
"""

import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from functools import partial

import torch
from torch.optim.lr_scheduler import LambdaLR
from tqdm import tqdm
from transformers import AutoConfig

import bert_part4_glue as glue
from bert_part4_common import (
    ALONE,
    RANDOM_HEAD,
    ArgumentParser,
    Fatal,
    Report,
    add_common_flags,
    article,
    autocast,
    autocast_dtype,
    check_positive,
    has_fused_adamw,
    line_plot,
    load_pretrained,
    portable,
    run_cli,
    seed_everything,
    start_processes,
)
from bert_part4_packing import padding_free
from bert_part4_runs import (
    Fit,
    Job,
    Run,
    collate,
    config_of,
    epoch_batches,
    lr_tag,
    model_folders,
    refuse_ignored,
    run_command,
    run_name,
    run_settings,
    save_model,
    summary_name,
)
from bert_part4_tasks import FAMILIES, METRIC_NAMES, Sources
from bert_part4_tasks import TASKS as GLUE_TASKS

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

# What the article printed (reference_logs/part4_sst2_stdout.txt, part4_mrpc_lr*_stdout.txt); the paper's
# numbers live with each task (bert_part4_tasks.py).
ARTICLE_FINAL = {("sst2", 2e-5): "0.9255 (807/872), F1 0.9279", ("mrpc", 2e-5): "0.8333 (340/408), F1 0.8847",
                 ("mrpc", 3e-5): "0.8333 (340/408), F1 0.8863", ("mrpc", 4e-5): "0.8480 (346/408), F1 0.8953",
                 ("mrpc", 5e-5): "0.8701 (355/408), F1 0.9094"}
ARTICLE_REPEAT = {("mrpc", 2e-5): "0.8186 (334/408), F1 0.8741"}     # the same job run once more: the article's spread
ARTICLE_BEFORE = {"sst2": "dev accuracy 0.4908", "mrpc": "dev accuracy 0.3162"}
ARTICLE_SETTING = "bert-base-uncased, batch 32, 3 epochs, seed 0"
ARTICLE_RUN = (32, 3, 0)               # the article's batch size, epochs and seed: its numbers are for these only
ARTICLE_MODEL = "bert-base-uncased"
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


def article_final(task, lr):
    """The article's number for this task and learning rate (and its repeat of the same job), labelled."""
    if (task, lr) not in ARTICLE_FINAL:
        return ""
    repeat = f"; the same job run again: {ARTICLE_REPEAT[(task, lr)]}" if (task, lr) in ARTICLE_REPEAT else ""
    return f"   [article ({ARTICLE_SETTING}): {ARTICLE_FINAL[(task, lr)]}{repeat}]"


# --- AdamW, no decay on biases and LayerNorm, warmup then linear decay (paper A.2, A.3) ---

def decay_groups(model, weight_decay):
    """Two parameter groups: everything else decays, the biases and LayerNorm weights do not."""
    decay, no_decay = [], []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            (no_decay if name == "bias" or isinstance(module, torch.nn.LayerNorm) else decay).append(p)
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
    if config.init == "random":
        return family.model_class(load_pretrained(AutoConfig, config.model, **family.model_kwargs))
    return load_pretrained(family.model_class, config.model, **family.model_kwargs)


def fine_tune(job, config, family, data, device, dtype, team=ALONE, quiet=False):
    """Train one model from the pre-trained weights, the article's lines in its order; returns the results of the run
    (on the team's rank 0). team: the processes that share this run, each taking its part of every batch."""
    name = run_name(config, job)
    report = Report(name, config.results_dir, quiet=quiet or not team.main)
    seed_everything(job.seed)
    model = new_model(family, config).to(device)    # e.g. BertForSequenceClassification.from_pretrained(model, num_labels=2)
    model = padding_free(model) if config.padding_free else model     # trains on the real tokens only: the same run
    model.train()
    n, wd, fused = len(data["train"]["input_ids"]), config.weight_decay, config.fused_adamw and has_fused_adamw(device)
    groups = decay_groups(model, wd)
    opt = torch.optim.AdamW(groups, lr=job.lr, weight_decay=wd, fused=fused)    # no decay on biases and LayerNorm
    steps = job.epochs * math.ceil(n / job.batch_size)                          # epochs x batches of one epoch
    warm = int(config.warmup * steps)                                           # warmup, then linear decay
    # the article's LambdaLR(opt, lambda s: s / warm if s < warm else (steps - s) / (steps - warm)):
    sched = LambdaLR(opt, lambda s: warmup_then_linear_decay(s, warm, steps))
    run = Run(team, device, os.path.join(config.results_dir, name + ".checkpoint"),
              run_settings(config, job, family, n, dtype, team))
    fit = Fit(model, opt, sched, family, data, device, dtype, run, report)
    state = run.resumed(model, opt, sched, report, steps) or begin(fit, job, config, warm, steps)
    seconds = train_loop(fit, job, config, state, steps)
    return finish(fit, job, config, state, steps, warm, seconds) if team.main else None


def train_loop(fit, job, config, state, steps):
    """The article's loop over the batches of every epoch, from the step the run stands at: a training step, the dev
    scores at each evaluation, a checkpoint. Returns its seconds (those of an interrupted run included)."""
    train, run, model, report = fit.data["train"], fit.run, fit.model, fit.report
    batches = [(epoch, idx) for epoch, in_epoch in enumerate(epoch_batches(
        len(train["input_ids"]), job.batch_size, job.epochs, job.seed, train["full_lengths"] if config.grouped else None),
        start=1) for idx in in_epoch]
    eval_every = max(1, steps // config.evals_of(job))
    ddp_model, step, t0 = run.wrap(model), state["step"], time.time() - state["elapsed"]   # DDP only under torchrun
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
                state["curve"].append(evaluation(fit, step, epoch, steps, job.lr, t0))
            run.after_step(step, steps, eval_every, model, fit.opt, fit.sched, {
                "curve": state["curve"], "before": state["before"], "lines": report.lines, "elapsed": time.time() - t0})
    return time.time() - t0


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
                   + fit.family.baseline(fit.data["train"], fit.data["devs"])
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


def finish(fit, job, config, state, steps, warm, seconds):
    """The FINAL line, the results JSON and log, the model kept when asked, and the learning curve."""
    family, report, curve, final = fit.family, fit.report, state["curve"], state["curve"][-1]["dev"]
    report.say(final_line(config.task, family, job, final, seconds, config.init))
    best = max(curve, key=lambda c: family.headline(c["dev"]))
    if family.headline(best["dev"]) > family.headline(final):
        report.say(f"(best dev {family.headline_name} seen during training: {family.headline(best['dev']):.4f} at step "
                   f"{best['step']}; not the result: the result is the model at the end of training, since picking the "
                   f"best checkpoint by its dev score would flatter the dev score)")
    result = {"name": report.name, "task": config.task, "model": portable(config.model), "lr": job.lr,
              "batch_size": job.batch_size, "epochs": job.epochs, "steps": steps, "warmup_steps": warm, "seed": job.seed,
              "device": str(fit.device), "before": state["before"], "final": final, "curve": curve,
              "best_during_training": {"step": best["step"], "dev": best["dev"]}, "seconds": seconds,
              "train_examples": fit.data["n_train"], "train_rows": len(fit.data["train"]["input_ids"]),
              **family.summary(fit.data["train"]), "settings": fit.run.settings,
              "computation": computation(config.padding_free, fit.opt)}
    if config.save_model:
        folder = model_folders(config, [job])[0]
        result["saved_model"] = portable(save_model(fit.model, fit.data["tok"], folder))
        report.say(f"model saved to {result['saved_model']} (config, safetensors weights, tokenizer)")
    if config.test_dir:                   # --glue-submission: this run's test-set predictions, for the chosen one
        result["test_predictions"] = glue.predict_tests(fit, config.test_dir, report)
    report.save(result, args=config.cli, argv=fit.data["argv"], device=fit.device)
    fit.run.finish()
    line_plot(os.path.join(config.results_dir, report.name + "_curve.png"), [c["step"] for c in curve],
              {"train loss": [c["train_loss"] for c in curve]}, "step",
              right=("dev score", [family.headline(c["dev"]) for c in curve]))
    return result


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
    padding = "padding-free steps (every layer but attention on the real tokens only)" if config.padding_free else (
        "dynamic padding")
    lines.append(f"  (also: AdamW{' fused' if computation(config.padding_free, fit.opt)['fused_adamw'] else ''}, clip "
                 f"{config.clip}, dropout {fit.model.config.hidden_dropout_prob}, seed {job.seed}, autocast "
                 f"{fit.dtype or 'off (fp32)'}, {padding}" + (", batches grouped by length (paper: random batches)"
                                                              if config.grouped else "")
                 + f"; model {portable(config.model)}" + (", random weights (--init random)" if config.init == "random"
                                                          else "") + f", article: {ARTICLE_MODEL})")
    return lines


def final_line(task, family, job, final, seconds, init="pretrained"):
    """FINAL sst2 dev accuracy 0.9255 (807/872), dev F1 0.9279, training time 48.3 minutes, then the article's
    number for its setting only (batch 32, 3 epochs, seed 0, pre-trained; labelled with its model, which may not be
    ours) and the published ones, labelled."""
    line = f"FINAL {task} " + family.final(final) + f", training time {seconds / 60:.1f} minutes"
    article_run = (job.batch_size, job.epochs, job.seed) == ARTICLE_RUN and init == "pretrained"
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


def grid(name, task, seeds, family, results, report):
    """--grid: every (batch, lr, epochs) of the grid, in a table sorted by the task's own metric (Table 1's: MCC for
    CoLA, F1 for MRPC and QQP, Spearman for STS-B); with --seeds, each setting's mean over the seeds first."""
    if seeds:
        report.say(f"grid {name} on {task}, mean +- std over {seeds} seeds, sorted by dev {family.selection_name}:")
        points = {}
        for r in results:
            points.setdefault((r["batch_size"], r["lr"], r["epochs"]), []).append(family.selection(r["final"]))
        for (b, lr, e), v in sorted(points.items(), key=lambda kv: -statistics.mean(kv[1])):
            report.say(f"  batch {b:>2}  lr {lr:<6g}  epochs {e}  {statistics.mean(v):.4f} +- "
                       f"{statistics.stdev(v) if len(v) > 1 else 0.0:.4f}")
    ranked = sorted(results, key=lambda r: -family.selection(r["final"]))
    report.say(f"grid {name} on {task}, sorted by dev {family.selection_name} (model at the end of training):")
    for r in ranked:
        article_run = (r["batch_size"], r["epochs"], r["seed"]) == ARTICLE_RUN
        report.say(f"  batch {r['batch_size']:>2}  lr {r['lr']:<6g}  epochs {r['epochs']}  {family.final(r['final'])}  "
                   f"({r['seconds']:.0f} s)" + (article_final(task, r["lr"]) if article_run else ""))
    return {"grid": name, "runs": [{k: r[k] for k in ("name", "lr", "batch_size", "epochs", "final", "process")}
                                   for r in ranked]}


def task_runs(args, argv, device, dtype, procs, summarise=True, report=None):
    """Every run the flags ask for on one task (with --grid, --seeds or glue, those done are skipped), then the summary
    of --seeds or --grid (glue: its report). Returns the runs' results (on rank 0), the task's family, the Config."""
    config = config_of(args, RECIPES[args.task], FAMILIES[args.task], glue.runs_folder(args.glue_submission))
    family = FAMILIES[args.task](args.task, args.max_len, args.stride, args.eval_batch_size)
    jobs = planned_runs(args.grid, args.seeds, args.seed, args.lr, args.batch_size, args.epochs)
    report = report or Report(summary_name(config, args.grid, args.seeds, jobs[0]), config.results_dir, quiet=not procs.main)
    header = [grid_size(args.grid) + (f", x {args.seeds} seeds = {len(jobs)} runs" if args.seeds else "")] if args.grid else []
    results = run_command(config, family, jobs, Sources.of(args), argv, fine_tune, (device, dtype, procs), args.parallel,
                          report, header, summarise and config.many)
    if summarise and config.many and procs.main:
        payload = (grid(args.grid, config.task, args.seeds, family, results, report) if args.grid else
                   restarts(config.task, jobs[0].lr, args.seeds, family, results, report))
        report.save({"task": config.task, "model": portable(config.model), **payload}, args=args, argv=argv, device=device)
    return results, family, config


# --- The command line: the article's commands, every input checked before any work ---

FAMILY_NAMES = {"cola": "GLUE", "squad": "SQuAD v1.1", "squad_v2": "SQuAD v2.0", "swag": "SWAG"}


def paper_defaults(field, text=str):
    """'GLUE 32, SQuAD v1.1 32, SQuAD v2.0 48, SWAG 16': a setting of RECIPES for each head family, for --help."""
    return ", ".join(f"{label} {text(getattr(RECIPES[task], field))}" for task, label in FAMILY_NAMES.items())


def build_parser():
    p = ArgumentParser(
        description="Part 4: BERT fine-tuned with the paper's recipe on a GLUE task (§4.1, A.3), SQuAD v1.1 "
                    "(§4.2), SQuAD v2.0 (§4.3) or SWAG (§4.4), on CUDA, Apple MPS or the CPU; or every GLUE task with "
                    "the paper's choice of learning rate, in a table beside its Table 1. Defaults are the paper's.",
        epilog="Each run writes results/part4_<task>_lr<lr>.{log,json}; --seeds and --grid add a summary, glue the "
               "table results/part4_glue_table.{log,json,md}.")
    p.add_argument("task", help="one of " + ", ".join(RECIPES) + "; or glue: every GLUE task, the best learning rate "
                                "of the paper's grid on each dev set, and Table 1 beside it (§4.1)")
    p.add_argument("lr", nargs="?", help=f"peak learning rate (default: {paper_defaults('lr', lr_tag)}; glue: each of "
                                         "the paper's grid 5e-5..2e-5, the best on dev; given, that one only)")
    p.add_argument("--model", default=ARTICLE_MODEL, help="pre-trained BERT: Hub id or local folder (default and "
                                                          "article: bert-base-uncased)")
    p.add_argument("--init", choices=["pretrained", "random"], default="pretrained",
                   help="pretrained (the paper; default) or random: the same architecture from random weights, "
                        "fine-tuned with the same recipe, to measure what pre-training buys")
    p.add_argument("--data-dir", help="GLUE folder (DIR/SST-2/train.tsv, dev.tsv, ...) or SWAG folder (DIR/train.csv, "
                                      "val.csv); default: the Hub datasets nyu-mll/glue, allenai/swag (regular)")
    p.add_argument("--train-data", help="SQuAD: official training JSON (default: the Hub dataset rajpurkar/squad or "
                                        "rajpurkar/squad_v2, split train)")
    p.add_argument("--dev-data", help="SQuAD: official dev JSON (default: the same Hub dataset, split validation)")
    p.add_argument("--tasks", help="glue: a comma-separated subset, e.g. cola,mrpc,rte (default: all nine)")
    p.add_argument("--glue-submission", metavar="DIR", help="glue: every run predicts the test set, and the chosen run "
                                                            "of each task is written to DIR as the GLUE server takes it "
                                                            "(CoLA.tsv ... AX.tsv, submission.zip)")
    p.add_argument("--batch-size", type=int, help=f"default: the paper's ({paper_defaults('batch_size')})")
    p.add_argument("--epochs", type=int, help=f"default: the paper's ({paper_defaults('epochs')})")
    p.add_argument("--max-len", type=int, help=f"longest input in tokens (default: {paper_defaults('max_len')}: "
                                               "run_classifier.py's inputs, run_squad.py's windows)")
    p.add_argument("--stride", type=int, help="SQuAD: tokens two windows share (default 128, as bert_part4_squad.py)")
    p.add_argument("--warmup", type=float, default=0.1, help="share of steps with a rising lr (default 0.1, run_classifier.py)")
    p.add_argument("--weight-decay", type=float, default=0.01,
                   help="AdamW weight decay, not on biases and LayerNorm (default 0.01, paper A.2)")
    p.add_argument("--clip", type=float, default=1.0, help="gradient-norm clipping (default 1.0, run_classifier.py)")
    p.add_argument("--seed", type=int, help="the one fixed seed (default 0; restarts: --seeds)")
    p.add_argument("--seeds", type=int, help="N restarts with seeds 0..N-1, then mean and std (paper §5.2: 5 restarts)")
    p.add_argument("--grid", choices=sorted(GRIDS), help="glue: lr 5e-5..2e-5 (§4.1); a3: batch x lr x epochs (A.3); "
                                                         "with --seeds, every setting with every seed")
    p.add_argument("--evals", type=int, help=f"dev evaluations during training (default: GLUE {RECIPES['cola'].evals}, as the "
                                             "article, once per epoch for MNLI and QQP under glue; SQuAD, SWAG once per epoch)")
    p.add_argument("--group-by-length", choices=["auto", "on", "off"], default="auto",
                   help="batches cut from length-sorted groups of 50 batches, in random order (default auto: on for "
                        "SQuAD, whose windows run from 100 to 384 tokens; off for GLUE and SWAG; paper: random batches)")
    p.add_argument("--padding-free", choices=["on", "off"], default="on",
                   help="on (the default): every layer but attention runs on the real tokens of each training batch "
                        "only, the dropout masks drawn as the padded model draws them: on the CPU the same run up to "
                        "float rounding (CUDA and MPS: the same distribution of masks, not the same masks); off: every "
                        "batch padded to its own longest input, today's computation. Not a setting of the results")
    p.add_argument("--fused-adamw", choices=["on", "off"], default="on",
                   help="on (the default): AdamW's fused kernel where torch has one (CUDA; the CPU and MPS from torch "
                        "2.4), as Hugging Face's Trainer; off: its loop of tensor operations. The same numbers up to float "
                        "rounding: not a setting of the results")
    p.add_argument("--max-train-examples", type=int, help="only the first N training examples (SQuAD: questions)")
    p.add_argument("--max-dev-examples", type=int, help="only the first N examples of each dev set (SQuAD: questions)")
    p.add_argument("--eval-batch-size", type=int, help=f"dev batch size (default: {FAMILIES['cola'].eval_batch_size}; SQuAD "
                                                       f"{FAMILIES['squad'].eval_batch_size} windows, as bert_part4_squad.py)")
    p.add_argument("--dtype", default="auto", help="auto (bf16 autocast on CUDA, fp32 elsewhere; the default), fp32 or bf16")
    p.add_argument("--save-model", help="keep the fine-tuned model in this folder (config, safetensors weights, "
                                        "tokenizer; several runs: one subfolder each)")
    add_common_flags(p)
    p.add_argument("--run-tag", help="appended to the results file names, e.g. the model's name")
    p.add_argument("--parallel", choices=["data", "runs"],
                   help="under torchrun: data = every batch split over the processes (default for one run); runs = "
                        "whole runs of --grid/--seeds spread over them (default for those)")
    p.add_argument("--backend", default="auto", help="under torchrun: auto (nccl on CUDA, gloo on CPU; the default), nccl, gloo")
    return p


def parse_args(argv):
    args = build_parser().parse_intermixed_args(argv)
    args.task = args.task.lower().replace("-", "")
    args.task = {"squadv2": "squad_v2", "squad2": "squad_v2", "squadv1": "squad"}.get(args.task, args.task)
    args.glue = args.task == "glue"
    if args.task not in RECIPES and not args.glue:
        raise Fatal(f"unknown task '{args.task}': choose one of {', '.join(RECIPES)}, or glue")
    refuse_ignored(args, FAMILIES["cola" if args.glue else args.task].takes)
    args.tasks = glue.task_list(args.tasks) if args.glue else None
    args.grid = args.grid or ("glue" if args.glue and args.lr is None else None)   # glue: the paper's selection
    recipe, family = (RECIPES["cola"], FAMILIES["cola"]) if args.glue else (RECIPES[args.task], FAMILIES[args.task])
    try:
        args.lr = float(args.lr) if args.lr is not None else recipe.lr
    except ValueError:
        raise Fatal(f"learning rate '{args.lr}' is not a number (e.g. 2e-5)")
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise Fatal(f"learning rate {args.lr}: must be a positive number (e.g. 2e-5)")
    check_positive({f"--{name.replace('_', '-')}": getattr(args, name) for name in (
        "batch_size", "epochs", "max_len", "evals", "eval_batch_size", "seeds", "max_train_examples", "max_dev_examples")})
    check_positive({"--stride": args.stride or None})
    args.stride = 128 if args.stride is None else args.stride
    args.seed = args.seed or 0
    args.batch_size = args.batch_size or recipe.batch_size
    args.epochs = args.epochs or recipe.epochs
    args.max_len = args.max_len or recipe.max_len
    args.evals_flag, args.evals = args.evals, args.evals or recipe.evals or args.epochs   # the flag: None = the recipe's
    args.eval_batch_size = args.eval_batch_size or family.eval_batch_size
    family.check(args.max_len, args.stride)
    if args.dtype == "fp16":
        raise Fatal("--dtype fp16: training in fp16 needs loss scaling, which this script does not do; use bf16 or fp32")
    if not 0 <= args.warmup < 1 or args.weight_decay < 0 or args.clip <= 0:
        raise Fatal("--warmup must be in [0, 1), --weight-decay >= 0 and --clip > 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    device, procs = start_processes(args.device, args.backend)
    dtype = autocast_dtype(device, args.dtype)
    if args.glue:               # every GLUE task, the learning rate chosen on dev, beside the paper's Table 1 (§4.1)
        return glue.glue_table(args, argv, partial(task_runs, argv=argv, device=device, dtype=dtype, procs=procs),
                               procs, device)
    task_runs(args, argv, device, dtype, procs)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
