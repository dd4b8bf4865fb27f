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
ends), gradient clipping at 1.0, dropout 0.1 (the model's config), one fixed seed, batches padded to their own
longest input. Each training step is computed padding-free by default (every layer but attention on the real tokens only;
part4/packing.py): on the CPU the same run up to float rounding; on CUDA and MPS the dropout masks fall otherwise
(the same distribution, not the same masks). The settings are the recipe's (part4/recipe.py).
A task brings only what differs: how it reads its data, how it encodes an example, its output layer and
its metric. Batch size and epochs default to the paper's for each task (GLUE 32 / 3, SQuAD v1.1 32 / 3,
SQuAD v2.0 48 / 2, SWAG 16 / 3), the learning rate to the paper's for SQuAD (5e-5) and SWAG (2e-5) and to
the article's 2e-5 for GLUE (paper: the best of 5e-5..2e-5 on dev; the glue command chooses so). A run evaluates
on dev about 30 times (GLUE, as the article) or once per epoch; a run cut by --max-train-examples no more often
than every 10 steps (its preamble says so). Each run writes results/part4_<task>_lr<lr>.{log,json} (with _bs, _ep,
_seed, _random-init or a --run-tag where those are not the paper's).
"""

import sys

from part4 import cli

if __name__ == "__main__":       # --help and a refused flag are answered before torch loads (seconds on a busy machine)
    cli.answer_now(sys.argv[1:])

import math
import re
import time

import torch
from torch.optim.lr_scheduler import LambdaLR
from tqdm import tqdm
from transformers import AutoConfig

from part4 import glue, lines, runs, tasks
from part4.article_labels import ARTICLE_BEFORE
from part4.batches import collate, epoch_batches
from part4.checkpoints import Run
from part4.devices import ALONE, autocast, autocast_dtype, has_fused_adamw, run_cli, seed_everything, start_processes
from part4.lines import RANDOM_HEAD, article
from part4.log import Report
from part4.models import load_model, load_pretrained, task_labels
from part4.packing import padding_free
from part4.plan import collected, earlier_result, plan_runs
from part4.recipe import evaluations, grid_settings
from part4.runs import Fit, Job, Where, eval_every, run_name, run_settings

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


# --- Our own fine-tune: SST-2 and MRPC on a laptop GPU (the article's lines, in its order; paper §3.2) ---

def new_model(family, model, init, head="new"):
    """The model to fine-tune, in fp32 whatever dtype it was saved in, labelled with the task's label names: the
    pre-trained weights with a new output layer (the paper; head "checkpoint": the checkpoint's own, kept), or with
    --init random the same architecture with every weight random (what pre-training buys, measured)."""
    if init == "random":                   # the architecture its config names (the log says which, if not a BERT)
        config = load_pretrained(AutoConfig, model, **family.model_kwargs)
        return task_labels(family.model_class.from_config(config, dtype=torch.float32), family.label_names)
    model, _ = load_model(family.model_class, model, head=head, **family.model_kwargs)   # its loading report checked
    return task_labels(model, family.label_names)


def fine_tune(job, config, family, data, where, processes=ALONE):
    """Fine-tune one model with the paper's recipe, the article's lines in its order: the pre-trained weights with a
    new output layer, or with --init random every weight random. Returns the run's results (on the first of the
    processes that share it, each taking its part of every batch; None on the others)."""
    c, device, name = config.command, where.device, run_name(config, job)
    report = Report(name, c.results_dir, quiet=not (where.processes.main and processes.main))
    seed_everything(job.seed)
    # BertForSequenceClassification.from_pretrained(model, num_labels=2), the article's line:
    model = new_model(family, c.model, c.init, c.head).to(device)
    model = padding_free(model) if c.padding_free else model        # real tokens only: on the CPU the same run
    model.train()
    train, wd = data["train"]["input_ids"], c.weight_decay
    fused = c.fused_adamw and has_fused_adamw(device)                           # the kernel, where torch has one
    groups = decay_groups(model, wd)
    opt = torch.optim.AdamW(groups, lr=job.lr, weight_decay=wd, fused=fused)    # no decay on biases and LayerNorm
    steps = job.epochs * math.ceil(len(train) / job.batch_size)    # the article's 3 * math.ceil(len(train) / 32)
    warm = int(c.warmup * steps)                                                # warmup, then linear decay
    # the article's LambdaLR(opt, lambda s: s / warm if s < warm else (steps - s) / (steps - warm)):
    sched = LambdaLR(opt, lambda s: warmup_then_linear_decay(s, warm, steps))
    run = Run(processes, device, runs.checkpoint_path(config, name),
              run_settings(config, job, family, len(train), where.dtype, processes))
    fit = Fit(model=model, opt=opt, sched=sched, family=family, data=data, device=device, dtype=where.dtype, run=run,
              report=report)
    every = eval_every(job.evals, steps, c.evals is None and data["n_train"] < data["n_train_all"])
    state = run.resumed(model, opt, sched, report, steps) or begin(fit, job, config, warm, steps, every)
    curve, seconds = train_loop(fit, job, config, state, steps, every)
    numbers = {"steps": steps, "warmup_steps": warm, "before": state["before"], "curve": curve, "seconds": seconds}
    return finish(fit, job, config, numbers) if processes.main else None


def train_loop(fit, job, config, state, steps, every):
    """The article's loop over the batches of every epoch, from the step the run stands at (state): a training step,
    the dev scores every `every` steps and at the end, a checkpoint. Returns the learning curve and the seconds (those
    of an interrupted run included)."""
    train, run, model, report = fit.data["train"], fit.run, fit.model, fit.report
    batches = [(epoch, idx) for epoch, in_epoch in enumerate(epoch_batches(
        len(train["input_ids"]), job.batch_size, job.epochs, job.seed, train["full_lengths"] if config.grouped else None),
        start=1) for idx in in_epoch]
    ddp_model, step, t0 = run.wrap(model), state["step"], time.time() - state["elapsed"]   # DDP only under torchrun
    curve = list(state["curve"])
    loss_fn = fit.family.loss
    with run, tqdm(total=steps, initial=step, desc=report.name, unit="step", file=sys.stderr, leave=False,
                   disable=report.quiet) as bar:
        for epoch, idx in batches[step:]:                              # every weight is trained
            rows, weight = run.share(idx)                              # all of the batch when alone
            loss = train_step(ddp_model, collate(train, rows, fit.device), fit.opt, fit.sched, config.command.clip,
                              run.weighted(loss_fn, weight), dtype=fit.dtype)
            run.add_loss(loss)
            step += 1
            bar.update()
            if step % every == 0 or step == steps:
                curve.append(evaluation(fit, step, epoch, steps, job.lr, t0))
            run.after_step(step, steps, every, model, fit.opt, fit.sched, state={
                "curve": curve, "before": state["before"], "lines": list(report.lines), "elapsed": time.time() - t0})
    return curve, time.time() - t0


def train_step(model, batch, opt, sched, clip, loss_fn, dtype=None):
    """One step of the article's loop: forward, loss, backward, clip the gradient norm, AdamW, schedule (dtype: the
    autocast dtype, None for fp32). Returns the loss."""
    with autocast(batch["input_ids"].device, dtype):
        loss = loss_fn(model, batch)       # model(input_ids=ids, token_type_ids=tt, attention_mask=am, labels=y).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    sched.step()
    opt.zero_grad()
    return loss.detach()


def begin(fit, job, config, warm, steps, every):
    """A run from step 0: the preamble, then the score of the untrained head."""
    for line in lines.preamble(config, fit, job, steps, warm, every):
        fit.report.say(line)
    main, init, head = fit.run.processes.main, config.command.init, fit.data["head"]
    before = fit.family.evaluate(fit.model, fit.data["devs"], fit.data["tok"], fit.device, fit.dtype) if main else None
    fresh = "every weight random, --init random" if init == "random" else fit.family.kept_head if head.kept else \
        fit.family.fresh
    fit.report.say(f"before fine-tuning ({fresh}): {fit.family.format(before) if main else ''}"
                   + fit.family.baseline(fit.data["majority"], fit.data["devs"])
                   + (article(ARTICLE_BEFORE[config.task], RANDOM_HEAD) if config.task in ARTICLE_BEFORE and
                      init == "pretrained" and not head.kept else ""))
    return {"step": 0, "curve": [], "before": before, "elapsed": 0.0}


def evaluation(fit, step, epoch, steps, lr, t0):
    """The mean training loss since the last evaluation and the dev scores (on rank 0), as one log line."""
    mean = fit.run.mean_loss(step, lr)
    main = fit.run.processes.main
    scores = fit.family.evaluate(fit.model, fit.data["devs"], fit.data["tok"], fit.device, fit.dtype) if main else None
    point = {"step": step, "epoch": epoch, "train_loss": mean, "dev": scores, "seconds": round(time.time() - t0, 1)}
    fit.report.say(lines.step_line(step, steps, epoch, mean, fit.family.format(scores) if main else '', time.time() - t0))
    return point


def finish(fit, job, config, numbers):
    """The FINAL line (the model at the end of training), the best dev score seen beside it, and the results saved."""
    final = numbers["curve"][-1]["dev"]
    fit.report.say(lines.final_line(config.task, fit.family, job, final, numbers["seconds"], config.command.init))
    for line in lines.best_seen_line(runs.best_seen(numbers["curve"], fit.family), final, fit.family):
        fit.report.say(line)
    return runs.save_results(fit, config, job, {**numbers, "final": final})


# --- Beyond one run: restarts over seeds (paper §5.2), and the paper's grids (§4.1, A.3) ---

def planned_runs(config):
    """The Job of every run this command asks of a task: each setting of the grid (grid glue: its learning rates at
    the batch size and epochs given, the paper's 32 and 3 by default), or the one given, with each seed; each with
    its count of dev evaluations (--evals, else the task's recipe: GLUE's 30, else once per epoch)."""
    settings = config.command
    seeds = range(settings.seeds) if settings.seeds else [settings.seed]
    points = (grid_settings(settings.grid, settings.batch_size, settings.epochs) if settings.grid
              else [(settings.batch_size, settings.lr, settings.epochs)])
    return [Job(lr=lr, batch_size=b, epochs=e, seed=s, evals=evaluations(settings.evals, config.recipe, e))
            for b, lr, e in points for s in seeds]


# --- The command: the runs it plans, this process's share, each run unless its result exists, the summary ---

def main(argv=None):
    settings = cli.parse(argv)                  # the command line, checked, as Settings: each value once (part4/cli.py)
    device, processes = start_processes(settings.device, settings.backend)
    where = Where(device=device, dtype=autocast_dtype(device, settings.dtype), processes=processes)
    in_table = settings.task == "glue"          # every GLUE task, the lr chosen on dev, beside Table 1 (§4.1)
    to_run, absent = glue.runnable(settings) if in_table else (settings.tasks, {})
    table = glue.start(settings, to_run, absent, processes) if in_table else None
    rows = {}
    for task in to_run:
        config, family, sources = tasks.task_inputs(settings, task, glue.ONCE_PER_EPOCH if in_table else ())
        jobs = planned_runs(config)
        report = table or Report(runs.summary_name(config, jobs[0]), settings.results_dir, quiet=not processes.main)
        plan = plan_runs(config, family, sources, jobs, where, report=report, summary=settings.many and not table,
                         header=lines.grid_header(config, len(jobs), in_table))
        mine = {k: earlier_result(plan, k) or fine_tune(jobs[k], config, family, plan.data, where, plan.sharing())
                for k in plan.mine()}
        results = collected(plan, mine)
        if processes.main and in_table:
            rows[task] = glue.choose(results, family, config, plan.data)
        elif processes.main and settings.many:
            lines.summarise(config, family, results, report, device)
    if processes.main and in_table:
        glue.finish(settings, rows, absent, table, runs.recorded_command(settings), device)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
