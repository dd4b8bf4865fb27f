"""One fine-tuning command across its tasks: where it runs, the report each task's runs go to (the GLUE table, or a
task's summary of its grid or restarts), each task's runs planned, their results collected and summed up, the end."""

import sys

from part4.command_line.errors import not_a_script
from part4.models.devices import autocast_dtype, start_processes
from part4.output import lines
from part4.output.log import Report
from part4.paper.recipe import ONCE_PER_EPOCH
from part4.run import records
from part4.run.plan import collected, plan_runs
from part4.run.records import Where
from part4.tasks import glue_row, task_inputs


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
            yield task_inputs.task_inputs(self.settings, name, ONCE_PER_EPOCH if self.in_table else ())

    def plan_task(self, task, jobs):
        """The task's runs planned (part4/run/plan.py), their skipped lines and summary going to the GLUE table or to the
        task's own summary of its grid or restarts."""
        config = task.config
        if self.in_table:
            report = self.table
        else:
            report = Report(records.summary_name(config, jobs[0]), self.settings.results_dir, quiet=not self.processes.is_main)
        return plan_runs(task, jobs, where=self.where, report=report, summary=self.settings.many and not self.in_table,
                         header=lines.grid_header(config, len(jobs), self.in_table))

    def collect(self, plan, mine):
        """Every run's results gathered (mine: this process's, by their place in plan.jobs); on the first process the
        task's row of the GLUE table chosen, or its grid or restarts summed up."""
        results = collected(plan, mine)
        if not self.processes.is_main:
            return
        if self.in_table:
            self.rows[plan.config.task] = glue_row.choose(results, plan.family, plan.config, plan.data)
        elif self.settings.many:
            lines.summarise(plan.config, plan.family, results, report=plan.report, device=self.where.device)

    def finish(self):
        """The GLUE table beside Table 1 (and the server's files), when the command is glue. Returns the exit code."""
        if self.processes.is_main and self.in_table:
            glue_row.table_written(self.settings, self.rows, absent=self.absent, report=self.table,
                        cli=records.recorded_command(self.settings), device=self.where.device)
        return 0


if __name__ == "__main__":
    sys.exit(not_a_script("part4/run/command.py", "python bert_part4_finetune.py <task>"))
