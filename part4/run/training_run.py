"""What one fine-tuning run needs around the paper's loop that the paper does not say: its log and progress bar, this
process's share of each batch (made on the host, then on the device), the training loss kept, the dev scores every
few steps, the checkpoint on a clock and the resume, the FINAL line and the results. bert_part4_finetune.py's
fine_tune holds the recipe and calls these by name."""

import sys
import time

import torch
from tqdm import tqdm

from part4.command_line.errors import not_a_script
from part4.command_line.fine_tune_settings import computed_on
from part4.data.batches import collate, epoch_batches, to_device
from part4.models.devices import has_fused_adamw
from part4.output import lines
from part4.output.lines import RANDOM_HEAD, article
from part4.output.log import Report
from part4.paper.article_labels import ARTICLE_BEFORE
from part4.run import records
from part4.run.checkpoint_files import Run
from part4.run.packing import is_padding_free, with_real_tokens
from part4.run.records import Fit, checkpoint_path, eval_every, run_name, run_settings

HOST = torch.device("cpu")


class TrainingRun:
    """One run of a task's plan (part4/run/plan.py Plan) for one Job, around the loop:

        run = TrainingRun(job, plan)
        net = run.begin_or_resume(model, opt, sched, steps=steps, warm=warm)   # from its checkpoint, or from step 0
        with run:                                                # Ctrl-C and SIGTERM: a checkpoint, then a clean stop
            for epoch, batch, weight in run.batches():           # the batches left, this process's rows of each
                ...                                              # the recipe's step
                run.after_step(epoch, loss)
        results = run.final_results()
    """

    def __init__(self, job, plan):
        self.job, self.plan, self.processes = job, plan, plan.sharing()
        self.name = run_name(plan.config, job)
        main = plan.where.processes.is_main and self.processes.is_main
        self.report = Report(self.name, plan.config.command.results_dir, quiet=not main)

    @property
    def uses_fused_adamw(self):
        """AdamW's fused kernel, where torch has one on this device and --fused-adamw is on."""
        return self.plan.config.command.fused_adamw and has_fused_adamw(self.plan.where.device)

    def begin_or_resume(self, model, opt, sched, *, steps, warm):
        """The run from its checkpoint when one was saved (the model, optimiser and schedule loaded; its log lines said
        again), else from step 0: the preamble, then the dev score of the untrained head. Returns the model each step
        trains through: itself alone, DistributedDataParallel under torchrun."""
        plan, job, data = self.plan, self.job, self.plan.data
        settings = run_settings(plan.config, job, family=plan.family, train_rows=len(data["train"]["input_ids"]),
                                dtype=plan.where.dtype, processes=self.processes)
        c, device = plan.config.command, plan.where.device
        self.run = Run(self.processes, device, checkpoint_path(plan.config, self.name), settings,
                       every=c.checkpoint_every)
        self.fit = Fit(model=model, opt=opt, sched=sched, family=plan.family, data=data, device=device,
                       dtype=plan.where.dtype, run=self.run, report=self.report, computed=computed_on(c, device.type))
        self.steps, self.warm = steps, warm
        cut = plan.config.command.evals is None and data["n_train"] < data["n_train_all"]
        self.every = eval_every(job.evals, steps, cut)
        state = self.run.resumed(model, opt, sched, report=self.report, steps=steps)
        if state is None:
            state = self.begin()
        self.before, self.step, self.curve = state["before"], state["step"], list(state["curve"])
        self.t0 = time.time() - state["elapsed"]
        return self.run.wrap(model, cudnn_attention=self.fit.computed["cudnn_attention"])

    def begin(self):
        """A run from step 0: the preamble, then the score of the untrained head (the article's beside it)."""
        fit, config, job = self.fit, self.plan.config, self.job
        for line in lines.preamble(config, fit, job, steps=self.steps, warm=self.warm, every=self.every) + \
                self.run.started_over(self.steps):
            self.report.say(line)
        before = self.dev_scores()
        init, head = config.command.init, fit.data["head"]
        if init == "random":
            fresh = "every weight random, --init random"
        elif head.kept:
            fresh = fit.family.kept_head
        else:
            fresh = fit.family.fresh
        scores = fit.family.format(before) if self.run.processes.is_main else ""
        theirs = ""
        if config.task in ARTICLE_BEFORE and init == "pretrained" and not head.kept:
            theirs = article(ARTICLE_BEFORE[config.task], RANDOM_HEAD)
        self.report.say(f"before fine-tuning ({fresh}): {scores}"
                        + fit.family.baseline(fit.data["majority"], fit.data["devs"]) + theirs)
        return {"step": 0, "curve": [], "before": before, "elapsed": 0.0}

    def __enter__(self):
        self.run.__enter__()
        self.bar = tqdm(total=self.steps, initial=self.step, desc=self.name, unit="step", file=sys.stderr, leave=False,
                        disable=self.report.quiet)
        return self

    def __exit__(self, *exc):
        self.bar.close()
        return self.run.__exit__(*exc)

    def batches(self):
        """The paper's random batches of every epoch (grouped by length where the run says so), from the step the run
        stands at: (epoch, this process's rows of the batch on the device, the weight of its loss: 1 alone; see
        part4/run/checkpoint_files.py shard). Each batch is made on the host, padded to its longest row (rounded up to a
        multiple of --pad-to-multiple-of: on CUDA by default), with where its real tokens lie for a padding-free model,
        then sent to the device (part4/data/batches.py to_device): no step waits for the device to learn its shape."""
        train, job, fit = self.plan.data["train"], self.job, self.fit
        lengths = train["full_lengths"] if self.plan.config.grouped else None
        epochs = epoch_batches(len(train["input_ids"]), job.batch_size, job.epochs, job.seed, lengths=lengths)
        multiple, packed = fit.computed["pad_to_multiple_of"], is_padding_free(fit.model)
        every_batch = []
        for epoch, in_epoch in enumerate(epochs, start=1):
            for idx in in_epoch:
                every_batch.append((epoch, idx))
        for epoch, idx in every_batch[self.step:]:
            rows, weight = self.run.share(idx)
            batch = collate(train, rows, HOST, multiple=multiple, max_width=fit.family.max_len)
            yield epoch, to_device(with_real_tokens(batch) if packed else batch, fit.device), weight

    def after_step(self, epoch, loss):
        """After each step: its loss kept (on the device until the next evaluation reads it); the dev scores every
        few steps and at the end (a log line each, and the step reached kept beside the checkpoint); a checkpoint at
        an evaluation before the last once --checkpoint-every has passed since the last one, and on SIGTERM or Ctrl-C
        a checkpoint, then a clean stop (decided alike on every process: part4/run/checkpoint_files.py Run.decide)."""
        self.run.add_loss(loss)
        self.step += 1
        self.bar.update()
        if self.step % self.every == 0 or self.step == self.steps:
            self.curve.append(self.evaluation(epoch))
            self.run.reached(self.step)
        stopping, saving = self.run.decide(evaluated=self.step % self.every == 0 and self.step < self.steps)
        if saving:
            self.checkpoint_now(stopping)
        if stopping:
            self.run.stopped(self.step, self.steps)

    def checkpoint_now(self, stopping):
        """The checkpoint of the run as it stands (its log lines with the one that says so), then that line."""
        said = self.run.saved_line(self.step, self.steps, stopping)
        state = {"curve": self.curve, "before": self.before, "lines": [*self.report.lines, said],
                 "elapsed": time.time() - self.t0}
        self.run.write_checkpoint(self.fit.model, self.fit.opt, self.fit.sched, {"settings": self.run.settings, "step": self.step,
                                                                      **state})
        self.report.say(said)

    def dev_scores(self):
        """The dev scores of the model as it stands (on the first process only; None on the others)."""
        fit = self.fit
        if not self.run.processes.is_main:
            return None
        return fit.family.evaluate(fit.model, fit.data["devs"], fit.data["tok"], device=fit.device, dtype=fit.dtype)

    def evaluation(self, epoch):
        """The mean training loss since the last evaluation and the dev scores, as one log line and a curve point."""
        mean = self.run.mean_loss(self.step, self.job.lr)
        scores = self.dev_scores()
        seconds = time.time() - self.t0
        point = {"step": self.step, "epoch": epoch, "train_loss": mean, "dev": scores, "seconds": round(seconds, 1)}
        shown = self.fit.family.format(scores) if self.run.processes.is_main else ""
        self.report.say(lines.step_line(self.step, self.steps, epoch=epoch, loss=mean, scores=shown, seconds=seconds))
        return point

    def final_results(self):
        """The FINAL line (the model at the end of training), the best dev score seen beside it, and the results saved;
        the results on the first of the processes that share the run, None on the others."""
        if not self.processes.is_main:
            return None
        fit, config, job = self.fit, self.plan.config, self.job
        seconds, final = time.time() - self.t0, self.curve[-1]["dev"]
        self.report.say(lines.final_line(config.task, fit.family, job, final=final, seconds=seconds,
                                         init=config.command.init))
        for line in lines.best_seen_line(records.best_seen(self.curve, fit.family), final, fit.family):
            self.report.say(line)
        numbers = {"steps": self.steps, "warmup_steps": self.warm, "before": self.before, "curve": self.curve,
                   "seconds": seconds, "final": final}
        return records.save_results(fit, config, job, numbers)


if __name__ == "__main__":
    sys.exit(not_a_script("part4/run/training_run.py", "python bert_part4_finetune.py (--help lists its flags)"))
