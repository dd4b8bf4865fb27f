"""The run around the recipe: what bert_part4_finetune.py's fine_tune and main call that the paper does not say:

    plan               one fine-tuning command across its tasks (each task's family and share), the plan of one task's
                       runs (every input checked and the data read once, the work split, the runs done before)
    glue_row           Table 1's GLUE row in one command: the lr chosen on dev, the table beside the paper's, the
                       server's files zipped
    training_run       one run around the loop: its log and lines (the preamble, each evaluation, the FINAL line), its
                       share of each batch and DDP, its evaluation cadence, the stop on a signal and when to checkpoint,
                       its results saved
    run_files          one run's settings and files: Job, Config, Where, its name and the settings its files record, a
                       results file reused for the same settings and never replaced by other ones, its checkpoint
                       written and read back to resume; the summaries of restarts and grids
    packing            padding-free training steps: every layer but attention on the real tokens only"""
