"""How lines are formatted: the pieces every script's lines are made of (scores with two decimals, a list as the
article prints it, the article's number labelled beside ours), and the lines of a fine-tuning command that are not one
task family's own: the preamble (the derived quantities first), each evaluation's line, the FINAL line, the best dev
score seen, the work split and the runs found done, the summaries of restarts and grids (their lines, and the summary
written beside them: part4/run/records.py's save_summary). A family formats its own scores (part4/tasks/families.py),
the GLUE row its table (part4/tasks/glue_row.py), each script the lines only it prints."""

import sys

from part4.command_line.errors import not_a_script
from part4.models.folders import weights_line
from part4.models.loading import model_type_note
from part4.output.results_files import portable
from part4.paper.article import ARTICLE_MODEL, ARTICLE_RUN, PAPER_OPTIMISER
from part4.paper.article_labels import ARTICLE_FINAL, article_final
from part4.paper.recipe import eval_every, grid_description, lr_tag
from part4.run.packing import padding_free_problem
from part4.run.records import by_setting, job_of, mean_and_std, save_summary
from part4.tasks.glue_tasks import TASKS
from part4.tasks.metrics import METRIC_NAMES

# --- What lines are made of: scores as printed, the article's number beside ours ---

def fmt(scores, missing="n/a"):
    """Scores as the logs and tables print them, with two decimals: 88.5 -> '88.50'; several (MNLI's matched and
    mismatched) joined by '/': [84.1, 83.4] -> '84.10/83.40'; None or none at all -> missing."""
    if scores is None:
        return missing
    values = scores if isinstance(scores, (list, tuple)) else [scores]
    return "/".join(f"{v:.2f}" for v in values) if values else missing


def rounded(values, digits):
    """A list printed as the article prints it: [-0.1763, -0.9611, 0.0659]."""
    return str([round(float(v), digits) for v in values])


RANDOM_HEAD = "the article's own random head, not expected to match"
UNTRAINED_HEAD = "from a trained head; ours is untrained, not expected to match"


def article(value, note=None):
    """The article's number, labelled, printed after ours on every route. Where ours comes from a randomly
    initialised head, the note says that the two are not expected to match."""
    return f"   [article: {value}" + (f"; {note}]" if note else "]")


def score_parts(scores, metrics, counts=False):
    """'dev accuracy 0.9255', 'dev MCC (matched) 0.41', ... for every dev set and metric; counts: '(807/872)' after
    the first accuracy."""
    parts = []
    for name, s in scores.items():
        tag = "" if len(scores) == 1 else f" ({name.replace('dev_', '')})"
        for k, m in enumerate(metrics):
            parts.append(f"dev {METRIC_NAMES[m]}{tag} {s[m]:.4f}" + (f" ({s['correct']}/{s['n']})" if counts and k == 0
                                                                     and m == "accuracy" else ""))
    return parts


# --- A fine-tuning run's lines: the preamble, each evaluation, the best dev score seen ---

def preamble(config, run, *, steps, warm, every, how):
    """The derived quantities a run (part4/run/training_run.py TrainingRun) prints before it trains: data, inputs cut,
    steps, warmup, how it is computed (how: its computation, as its results record it), and what a cut run leaves
    out (every: the steps between two dev evaluations)."""
    c, data, processes, device, job = config.settings, run.data, run.processes, run.device, run.job
    lines = [f"task {config.task}: {data.n_train} training examples, "
             + ", ".join(f"{data.n_dev[k]} {k.replace('_', ' ')} examples" for k in data.devs)
             + f", device {device.type}"
             + (f" x {processes.world} processes (each takes 1/{processes.world} of every batch)"
                if processes.world > 1 else "")]
    lines += run.family.describe(data.train)
    lines.append(f"batch {job.batch_size}, {job.epochs} epochs = {steps} steps, learning rate {job.lr}, warmup {warm} "
                 f"steps, weight decay {c.weight_decay}")
    cut = cut_lines(config, data, steps=steps, every=every, job=job)
    return lines + computed(config, run, job, how) + cut + weights_lines(config, run)


def weights_lines(config, run):
    """The weight files the run starts from (and the dtype they were saved in, where it is not the fp32 they are
    loaded in), its output layer (a new one, the paper's, or the checkpoint's, kept), and any warning the model's folder
    gave when it was read (read_model_folder, part4/models/folders.py)."""
    folder, head, family = run.data.model_folder, run.data.head, run.family
    lines = []
    if config.settings.init == "pretrained":
        said = family.kept_head if head.kept else family.new_head + (f" ({head.note})" if head.note else "")
        lines.append(weights_line(folder, said))
    return lines + list(folder.notes)


def computed(config, run, job, how):
    """'(also: AdamW fused, clip 1.0, dropout 0.1, ...)' and the AdamW the paper used; a model the padding-free steps
    do not compute trains padded, and the first line says why."""
    c, model, packed = config.settings, run.model.config, how["padding_free_steps"]
    padding = "padding-free steps (every layer but attention on the real tokens only)" if packed else "dynamic padding"
    fused = " fused" if how["fused_adamw"] else ""
    why = [f"padded steps, not padding-free: {padding_free_problem(run.model)}"] if c.padding_free and not packed else []
    return why + [f"  (also: AdamW{fused}, clip {c.clip}, "
                  f"dropout {getattr(model, 'hidden_dropout_prob', getattr(model, 'dropout', None))}, seed {job.seed}, "
                  f"autocast {run.dtype or 'off (fp32)'}, {padding}{kernels(c, how, run.device)}"
                  + (", batches grouped by length (paper: random batches)" if config.grouped else "")
                  + f"; model {portable(c.model)}{model_type_note(run.model)}"
                  + (", random weights (--init random)" if c.init == "random" else "") + f", article: {ARTICLE_MODEL})",
                  f"  (AdamW is torch's: eps 1e-8, bias-corrected moments; paper: {PAPER_OPTIMISER})"]


def kernels(settings, how, device):
    """', widths rounded up to multiples of 8, attention without cuDNN's kernels': how the steps are computed where
    that is not the recipe's plain padded batches ('' on the CPU by default); a flag that has no effect on this
    device says so."""
    parts = [f"widths rounded up to multiples of {how['pad_to_multiple_of']} tokens"] if how["pad_to_multiple_of"] > 1 else []
    if device.type == "cuda":
        parts.append("attention on cuDNN's kernels where SDPA picks them" if how["cudnn_attention"]
                     else "attention on SDPA's flash or memory-efficient kernels, not cuDNN's")
    elif settings.cudnn_attention is not None:
        parts.append(f"--cudnn-attention has no effect on {device.type}: no cuDNN attention there")
    return "".join(", " + p for p in parts)


def cut_lines(config, data, *, steps, every, job):
    """What a cut run leaves out (and the flags that cut it), and how often a cut run evaluates on dev when that is
    not the recipe's."""
    c = config.settings
    cut = [f"{n} of {whole:,} {what} examples" for n, whole, what in [(data.n_train, data.n_train_all, "training")]
           + [(data.n_dev[k], data.n_dev_all[k], k.replace("_", " ")) for k in data.devs] if n < whole]
    flags = [flag for flag, n in c.cuts.items() if n]
    lines = [f"  (cut, not the paper's: the first {', the first '.join(cut)}; {', '.join(flags)})"] if cut else []
    if every != eval_every(job.evals, steps, cut=False):
        lines.append(f"  (a cut run: a dev evaluation every {every} steps, {steps // every} in all, not the recipe's "
                     f"{job.evals}, which are for full runs; --evals sets them)")
    return lines


def step_line(step, steps, epoch, loss, scores, seconds):
    """'step   100/6315  epoch 1  train loss 0.3120  dev accuracy 0.9060  (95 s)' (scores: the family's, formatted)."""
    return f"step {step:>5}/{steps}  epoch {epoch}  train loss {loss:.4f}  {scores}  ({seconds:.0f} s)"


def best_seen_line(best, final, family):
    """The best dev score seen during training, when it beats the final one: said beside the result, never taken for
    it ([] when the final one is the best)."""
    if family.selection(best["dev"]) <= family.selection(final):
        return []
    return [f"(best dev {family.selection_name} seen during training: {family.selection(best['dev']):.4f} at step "
            f"{best['step']}; not the result: the result is the model at the end of training, since picking the best "
            f"checkpoint by its dev score would flatter the dev score)"]


def restarts(task, lr, seeds, family, results, report):
    """--seeds N: N runs with seeds 0..N-1, then the mean and std of every metric."""
    summary = {}
    for dev in results[0]["final"]:
        for m in family.metrics:
            values = [r["final"][dev][m] for r in results]
            mean, std = mean_and_std(values)
            summary[f"{dev}.{m}"] = {"values": values, "mean": mean, "std": std}
            report.say(f"{task} lr {lr} over {len(values)} seeds: {dev} {METRIC_NAMES[m]} {mean:.4f} +- {std:.4f}  "
                       f"(values {', '.join(f'{v:.4f}' for v in values)})")
    return {"seeds": seeds, "runs": [r["name"] for r in results], "processes": [r["process"] for r in results],
            "summary": summary}


def grid_table(config, family, results, report, labels=None):
    """--grid: every (batch, lr, epochs) of the grid, in a table sorted by the task's own metric (Table 1's: MCC for
    CoLA, F1 for MRPC and QQP, Spearman for STS-B); with --seeds, each setting's mean over the seeds first. labels:
    {run name: the article's number for its setting} where there is one."""
    name, task, seeds = config.settings.grid, config.task, config.settings.seeds
    if seeds:
        report.say(f"grid {name} on {task}, mean +- std over {seeds} seeds, sorted by dev {family.selection_name} "
                   f"(paper, BERT-large: the best of several restarts on dev):")
        points = {key: mean_and_std(v) for key, v in by_setting(results, lambda r: family.selection(r["final"])).items()}
        for (b, lr, e), (mean, std) in sorted(points.items(), key=lambda kv: -kv[1][0]):
            report.say(f"  batch {b:>2}  lr {lr:<6g}  epochs {e}  {mean:.4f} +- {std:.4f}")
    ranked = sorted(results, key=lambda r: -family.selection(r["final"]))
    report.say(f"grid {name} on {task}, sorted by dev {family.selection_name} (model at the end of training):")
    for r in ranked:
        report.say(f"  batch {r['batch_size']:>2}  lr {r['lr']:<6g}  epochs {r['epochs']}  {family.final(r['final'])}  "
                   f"({r['seconds']:.0f} s)" + (labels or {}).get(r["name"], ""))
    return {"grid": name, "runs": [{k: r[k] for k in ("name", "lr", "batch_size", "epochs", "final", "process")}
                                   for r in ranked]}


def grid_header(config, n_runs, in_table):
    """'rte: grid glue (paper §4.1): lr {5e-5, 4e-5, 3e-5, 2e-5} = 4 runs, x 2 seeds = 8 runs' (no line without --grid)."""
    c = config.settings
    if not c.grid:
        return []
    return [(f"{config.task}: " if in_table else "") + grid_description(c.grid, c.batch_size, c.epochs)
            + (f", x {c.seeds} seeds = {n_runs} runs" if c.seeds else "")]


# --- The FINAL line and the summaries of restarts and grids, the article's number beside a run in its setting ---

def article_runs():
    """'SST-2 at lr 2e-5 and MRPC at 5e-5..2e-5, batch 32, 3 epochs': the fine-tunes the article printed a FINAL line
    for, from its entries (part4/paper/article.py)."""
    lrs = {}
    for task, lr in ARTICLE_FINAL:
        lrs.setdefault(task, []).append(lr)
    runs = [f"{TASKS[t].folder} at " + (f"lr {lr_tag(v[0])}" if len(v) == 1 else f"{lr_tag(max(v))}..{lr_tag(min(v))}")
            for t, v in lrs.items()]
    return f"{' and '.join(runs)}, batch {ARTICLE_RUN[0]}, {ARTICLE_RUN[1]} epochs"


def article_setting(job, init):
    """Is this run in the setting the article's numbers are for (batch 32, 3 epochs, seed 0, pre-trained weights)?"""
    return (job.batch_size, job.epochs, job.seed) == ARTICLE_RUN and init == "pretrained"


def final_line(task, family, job, final, seconds, init="pretrained"):
    """FINAL sst2 dev accuracy 0.9255 (807/872), dev F1 0.9279, training time 48.3 minutes, then the article's
    number for its setting only (batch 32, 3 epochs, seed 0, pre-trained; labelled with its model, which may not be
    ours) and the published ones, labelled."""
    line = f"FINAL {task} " + family.final(final) + f", training time {seconds / 60:.1f} minutes"
    article_run = article_setting(job, init)
    line += article_final(task, job.lr) if article_run else ""
    if task in TASKS and not (article_run and (task, job.lr) in ARTICLE_FINAL):
        line += article(f"no run with these settings (it ran {article_runs()})")
    return line + "".join(f"   [{r}]" for r in family.references())


def article_labels(task, results, init):
    """{run name: the article's number} for the runs in the article's setting that it printed a number for."""
    return {r["name"]: article_final(task, r["lr"]) for r in results
            if article_setting(job_of(r), init)}


def summarise(config, family, results, *, report, device):
    """--seeds: the mean and std of every metric over the restarts; --grid: every setting, ranked by Table 1's metric,
    the article's number beside a run in its setting."""
    c = config.settings
    labels = article_labels(config.task, results, c.init)
    payload = (grid_table(config, family, results, report, labels=labels) if c.grid
               else restarts(config.task, results[0]["lr"], c.seeds, family, results=results, report=report))
    save_summary(report, config, payload, device)


def split_line(mode, processes, n_runs):
    if mode == "data":
        return (f"work split: {processes.world} processes ({processes.backend}), data parallel: each of the {n_runs} run(s) "
                f"uses every process, each taking 1/{processes.world} of every batch")
    return (f"work split: {processes.world} processes ({processes.backend}), whole runs: process r trains runs r, r + "
            f"{processes.world}, ... of the {n_runs}, each alone on its own device")


def skipped_line(result):
    return f"run {result['name']}: its results already exist for the same settings ({result['name']}.json): skipped"


if __name__ == "__main__":
    sys.exit(not_a_script("part4/output/lines.py", "python bert_part4_finetune.py (--help lists its flags)"))
