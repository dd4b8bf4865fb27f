"""The rooms below the six scripts at the root, each holding one thing (docs/layout.md says which file holds what):
the article's numbers (article) and the paper's settings (recipe); the command lines (settings and cli for the
fine-tuning script, parsers for the others, flags for what all share); devices and processes (devices), the Hub (hub),
model loading (models) and what a model folder holds (model_folders), the log (log), results files (files), plots
(plots) and how lines are formatted (lines); a fine-tuning command across its tasks (command), a run's batches
(batches), what a run needs around the recipe's loop (training), checkpoints and resume (checkpoints), the plan of a
task's runs (plan), a run's records (runs) and padding-free steps (packing); the tasks:
GLUE's table (glue_tasks), readers (readers), GLUE's metrics (metrics), the head families (families) and which task is
in which (tasks), the GLUE row (glue) and the GLUE server's files (submission); SQuAD's windows and span search (spans)
and its official metric (squad_metric, the standard library only); the plan of the whole article (experiments, its
estimates measured by calibration) and the stand-in of the article's models built without the Hub (stand_in). Run
the scripts at the root; the one room that runs on its own is the metric, which scores a predictions file as the
official scripts do:
python -m part4.squad_metric dev-v2.0.json predictions.json"""
