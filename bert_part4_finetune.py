"""BERT, explained - Part 4: fine-tuning BERT with the paper's recipe (paper §3.2, §4.1-4.4, A.3).

    python bert_part4_finetune.py sst2            # the article's SST-2 run (lr 2e-5)
    python bert_part4_finetune.py mrpc 5e-5       # one MRPC learning rate; --grid glue runs all four
    python bert_part4_finetune.py rte --seeds 5   # five restarts, then mean and std
    python bert_part4_finetune.py squad --save-model models/squad      # SQuAD v1.1 (§4.2), keep the model
    python bert_part4_finetune.py squad_v2        # SQuAD v2.0 (§4.3);  swag: SWAG (§4.4)
    python bert_part4_finetune.py mrpc --model DIR --data-dir ../shared/data/glue_data   # offline
    python bert_part4_finetune.py glue            # every GLUE task, the best lr on dev, beside Table 1

One recipe for every task: AdamW with weight decay 0.01 (none on biases and LayerNorm weights), the learning rate
rising linearly over the first 10% of steps then falling linearly to zero (the article's lambda; Google's
optimization.py, which run_classifier.py calls, decays from step 0 instead, so its rate is 0.9 of the peak when warmup
ends), gradient clipping at 1.0 (optimization.py's), dropout 0.1 (the model's config), one fixed seed, batches padded
to their own longest input; each training step computed padding-free by default (--padding-free: its --help says what it is,
part4/data/batches.py how). The settings are the recipe's (part4/paper/recipe.py).
A task brings only what differs: how it reads its data, how it encodes an example, its output layer and
its metric. Batch size, epochs and learning rate default to the paper's for each task, GLUE's learning rate to
the article's (paper: the best of its grid on dev; the glue command chooses so), and a run evaluates on dev as often
as the recipe says: each default is in --help and part4/paper/recipe.py, and the run's preamble says what it took. Each run writes
results/part4_<task>_lr<lr>.{log,json} (with _bs, _ep, _seed, _random-init or a --run-tag where those are not the
paper's).
"""

import sys

from part4.command_line import declarations, fine_tune_settings

if __name__ == "__main__":       # --help and a refused flag are answered before torch loads (seconds on a busy machine)
    declarations.answer_now(fine_tune_settings.parse, sys.argv[1:])

import math
import re

import torch
from torch.optim.lr_scheduler import LambdaLR
from transformers import AutoConfig

from part4.data.batches import make_padding_free
from part4.models.loading import autocast, load_model, load_pretrained, run_cli, seed_everything, task_labels
from part4.paper.recipe import grid_points
from part4.run.command import Command
from part4.run.run_files import Job
from part4.run.training_run import TrainingRun, wrapped

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

def new_model(family, name, init, head):
    """The model to fine-tune, in fp32 whatever dtype it was saved in, labelled with the task's label names: the
    pre-trained weights with a new output layer (the paper; head "checkpoint": the checkpoint's own, kept; one that
    cannot be kept was refused when the task was planned, before any work: part4/run/command.py check_task_inputs, which
    finds how it comes, TaskData.output_layer), or with --init random the same architecture with every weight random
    (what pre-training buys, measured). name: a Hub id or a local folder; head: the output layer asked for (--head)."""
    if init == "random":                   # the architecture its config names (the log says which, if not a BERT)
        config = load_pretrained(AutoConfig, name, **family.model_kwargs)
        return task_labels(family.model_class.from_config(config, dtype=torch.float32), family.label_names)
    model, _ = load_model(family.model_class, name, head=head, **family.model_kwargs)   # its loading report checked
    return task_labels(model, family.label_names)


def fine_tune(run, data):
    """One run of the paper's recipe, the article's lines in its order (run: a RunSettings; data: the task's TaskData).
    What the paper does not say is part4/run/training_run.py's, each step of it a call here. Returns the results."""
    seed_everything(run.seed)
    # BertForSequenceClassification.from_pretrained(model, num_labels=2).to(device), the article's line:
    model = new_model(data.family, run.model, run.init, run.head).to(run.device)   # a new output layer, or the checkpoint's
    if run.padding_free_steps:   # --padding-free: each training step on the real tokens only, the same computation
        model = make_padding_free(model, run.dropout_masks)   # masks drawn as device, dtype allow (part4/data/batches.py)
    model.train()
    # the article's AdamW(groups, lr=2e-5, weight_decay=0.01): no decay on biases and LayerNorm
    opt = torch.optim.AdamW(decay_groups(model, run.weight_decay), lr=run.lr, fused=run.fused_adamw)
    steps = run.epochs * math.ceil(run.train_rows / run.batch_size)   # 3 epochs, batch 32: 3 * math.ceil(len(train) / 32)
    warm = int(run.warmup * steps)                  # the article's int(0.1 * steps): 10% warmup, then linear decay
    # the article's LambdaLR(opt, lambda s: s / warm if s < warm else (steps - s) / (steps - warm)):
    sched = LambdaLR(opt, lambda s: warmup_then_linear_decay(s, warm, steps))
    training = TrainingRun(run, data, model, sched, steps=steps, warm=warm)   # AdamW: sched.optimizer
    if not training.resume():               # resumed from its checkpoint (model, AdamW, schedule, RNG, lines); else begun:
        training.say_preamble()             # the derived quantities first: the data, device, steps, warmup, ...
        training.score_before()             # the untrained head's dev score (the article's "before" line)
        training.time_and_say_cost()        # one step timed: what the run will cost here, said before it is paid
    net = wrapped(model, run.processes, run.device, run.cudnn_attention)   # itself alone; under torchrun DDP's
    with training.stoppable():              # Ctrl-C or SIGTERM: the step finished, then a checkpoint and a clean stop
        for epoch, batch, share in training.batches():    # the article's batches(train): every weight is trained
            with autocast(run.device, run.autocast_dtype):
                # model(..., labels=y).loss; share: 1 alone, under torchrun rows here x processes / batch rows (DDP)
                loss = data.family.loss(net, batch) * share
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), run.clip)   # article: clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            training.step_done(loss.detach())              # its loss kept for the next evaluation's mean
            if training.step % training.eval_every == 0 or training.step == steps:   # at the run's cadence and at
                training.score_dev(epoch)      # its end (the article's 31 evaluations on SST-2): dev scores, train loss
            stop, save = training.stop_or_save()           # a signal on any process; the checkpoint's clock
            if save:
                training.save_checkpoint(stop)
            if stop:
                training.stop()                            # one line: how to resume
    return training.final_results()                        # the FINAL line, the results written


# --- Beyond one run: restarts over seeds (paper §5.2), and the paper's grids (§4.1, A.3) ---

def planned_jobs(config):
    """The Job of every run this command asks of a task: each point of the grid (grid glue: its learning rates at
    the batch size and epochs given, the task's recipe's by default: GLUE's 32 and 3), or the one given, with each seed; each with
    its count of dev evaluations (--evals, else the task's recipe: GLUE's 30, else once per epoch)."""
    settings = config.settings
    seeds = range(settings.seeds) if settings.seeds else [settings.seed]
    points = (grid_points(settings.grid, settings.batch_size, settings.epochs) if settings.grid
              else [(settings.batch_size, settings.lr, settings.epochs)])
    return [Job(lr=lr, batch_size=b, epochs=e, seed=s, dev_evaluations=settings.evals or config.recipe.evals or e)
            for b, lr, e in points for s in seeds]


# --- The command: the runs it plans, this process's share, each run (a grid's run done before skipped), the summary ---

def main(argv=None):
    command = Command(fine_tune_settings.parse(argv))   # the command line as Settings (part4/command_line); its device, processes
    for inputs in command.task_inputs:                  # each task's share, and with glue the table beside Table 1 (§4.1)
        plan = command.plan_task(inputs, planned_jobs(inputs.config))   # every input checked, the data read once
        results = {}
        for k in plan.mine:                     # this process's share of the runs
            if k in plan.done_before:           # a grid's, restarts' or glue's run whose result exists: skipped
                results[k] = plan.skip(k)       # its earlier results, its line said in its turn
            else:
                results[k] = fine_tune(plan.runs[k], plan.data)     # its settings, the task's data read once
        command.collect(plan, results)          # the task's row of the GLUE table, or its grid or restarts summed up
    return command.finish()


if __name__ == "__main__":
    sys.exit(run_cli(main))
