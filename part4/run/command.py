"""One fine-tuning command across its tasks: where it runs, the report each task's runs go to (the GLUE table, or a
task's summary of its grid or restarts), each task's runs planned, their results collected and summed up, the end."""


from typing import NamedTuple

from part4.data.readers import TASKS, Sources
from part4.models.devices import autocast_dtype
from part4.output.log import Report
from part4.paper.recipe import ONCE_PER_EPOCH
from part4.run import glue_row, records
from part4.run.plan import collected, plan_runs, start_processes
from part4.run.records import Config, Where, task_config
from part4.tasks.families import Classification, Family, MultipleChoice, SpanExtraction


class Command:
    """What bert_part4_finetune.py's main steps through:

        command = Command(settings)
        for task in command.each_task():
            plan = command.plan_task(task, jobs)          # the task's runs planned, the data read once
            ...                                      # each run of this process's share, unless done
            command.collect(plan, results)
        return command.finish()
    """

    def __init__(self, settings):
        self.settings, self.rows = settings, {}
        device, self.processes = start_processes(settings.device, settings.backend)
        self.where = Where(device=device, dtype=autocast_dtype(device, settings.dtype), processes=self.processes)
        self.in_table = settings.task == "glue"    # every GLUE task, the lr chosen on dev, beside Table 1 (§4.1)
        if self.in_table:
            self.to_run, self.absent = glue_row.runnable(settings)
            self.table = glue_row.start(settings, self.to_run, self.absent, self.processes)
        else:
            self.to_run, self.absent, self.table = settings.tasks, {}, None

    def each_task(self):
        """Each task's inputs (its Config, family and data sources), in the command's order."""
        for name in self.to_run:
            yield task_inputs(self.settings, name, ONCE_PER_EPOCH if self.in_table else ())

    def plan_task(self, task, jobs):
        """The task's runs planned (part4/run/plan.py), their skipped lines and summary going to the GLUE table or to the
        task's own summary of its grid or restarts."""
        config = task.config
        if self.in_table:
            report = self.table
        else:
            report = Report(records.summary_name(config, jobs[0]), self.settings.results_dir, quiet=not self.processes.is_main)
        return plan_runs(task, jobs, where=self.where, report=report, summary=self.settings.many and not self.in_table,
                         header=records.grid_header(config, len(jobs), self.in_table))

    def collect(self, plan, mine):
        """Every run's results gathered (mine: this process's, by their place in plan.jobs); on the first process the
        task's row of the GLUE table chosen, or its grid or restarts summed up."""
        results = collected(plan, mine)
        if not self.processes.is_main:
            return
        if self.in_table:
            self.rows[plan.config.task] = glue_row.choose(results, plan.family, plan.config, plan.data)
        elif self.settings.many:
            records.summarise(plan.config, plan.family, results, report=plan.report, device=self.where.device)

    def finish(self):
        """The GLUE table beside Table 1 (and the server's files), when the command is glue. Returns the exit code."""
        if self.processes.is_main and self.in_table:
            glue_row.table_written(self.settings, self.rows, absent=self.absent, report=self.table,
                        cli=records.recorded_command(self.settings), device=self.where.device)
        return 0



# --- Each task of the command: its Config, its head family, where its data comes from ---

FAMILIES = {**{name: Classification for name in TASKS}, "swag": MultipleChoice, "squad": SpanExtraction,
            "squad_v2": SpanExtraction}


class TaskInputs(NamedTuple):
    """One task's share of the command."""
    config: Config                     # its Config, made for it
    family: Family                     # its head family
    sources: Sources                   # where its data comes from


def task_inputs(settings, task, once_per_epoch=()):
    """One task's share of the command: its Config (made for it), its head family and where its data comes from."""
    windows = {"stride": settings.stride} if FAMILIES[task] is SpanExtraction else {}     # SQuAD's alone
    family = FAMILIES[task](task, settings.max_len, eval_batch_size=settings.eval_batch_size, **windows)
    sources = Sources(task=task, data_dir=settings.data_dir, train_data=settings.train_data, dev_data=settings.dev_data)
    return TaskInputs(config=task_config(settings, task, family, once_per_epoch), family=family, sources=sources)
