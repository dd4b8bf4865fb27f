"""The rooms below the six scripts at the root (bert_part4_heads, _finetune, _squad, _math, _report, _reproduce), in
folders named for what a reader looks for; each folder's __init__ lists its rooms, and docs/layout.md says what each
file holds and imports:

    paper          what the paper and the article say: the article's numbers, their labels, the recipe
    command_line   the command line and its settings: one-line errors, settings declared once, each script's parser
    models         loading a model and where it runs: the Hub, a model folder read, the model loaded, devices
    data           reading and batching data: each task's files read, batches
    tasks          the tasks: the three head families, GLUE's tasks, metrics and row, SQuAD's spans and metric
    run            the run around the recipe: the command, the plan of a task's runs, one run, its checkpoints,
                   its records, padding-free steps
    output         what the scripts print and write: lines, the log, results files, plots
    reproduction   the whole article in one command: the experiments, their estimates, the stand-in models

Run the scripts at the root. Two rooms run on their own: SQuAD's official metric, which scores a predictions file as
the official scripts do (python -m part4.tasks.squad_metric dev-v2.0.json predictions.json), and the calibration,
which bert_part4_reproduce.py runs in a process of its own (python -m part4.reproduction.calibration REQUEST.json)."""
