"""The tasks a fine-tuning command takes, each in its head family (part4/tasks/families.py), and one task's share of the command:
its Config, its family and where its data comes from."""

import sys
from typing import NamedTuple

from part4.command_line.errors import not_a_script
from part4.data.readers import Sources
from part4.run.records import Config, task_config
from part4.tasks.families import Classification, Family, MultipleChoice, SpanExtraction
from part4.tasks.glue_tasks import TASKS

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


if __name__ == "__main__":
    sys.exit(not_a_script("part4/tasks/task_inputs.py", "python bert_part4_finetune.py <task> (--help lists the tasks)"))
