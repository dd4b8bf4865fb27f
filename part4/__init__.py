"""The rooms below the six scripts at the root (bert_part4_heads, _finetune, _squad, _math, _report, _reproduce), in
folders named for what a reader looks for, in the order their imports run (each folder imports only those above it);
each folder's __init__ lists its rooms, and docs/layout.md says what each file holds and imports:

    paper          what the paper and the article say: the article's numbers, their labels, the recipe
    command_line   the command line and its settings: one-line errors, settings declared once, each script's parser
    output         what the scripts print and write: how a line is formatted, the log, results files, plots
    models         loading a model and where it runs: the Hub, a model folder read, the model loaded, the device
    data           reading and batching data: each task's data read (GLUE's task table with it), batches, padded or
                   padding-free
    tasks          the tasks: the three head families, GLUE's metrics, SQuAD's spans and metric
    run            the run around the recipe: the command and its processes, the plan of a task's runs, the GLUE
                   row, one run and its lines, its checkpoints, its records and summaries
    reproduction   the whole article in one command: the experiments, their estimates, the stand-in models

Run the scripts at the root. Two rooms run on their own: SQuAD's official metric, which scores a predictions file as
the official scripts do (python -m part4.tasks.squad_metric dev-v2.0.json predictions.json), and the calibration,
which bert_part4_reproduce.py runs in a process of its own (python -m part4.reproduction.calibration REQUEST.json)."""
