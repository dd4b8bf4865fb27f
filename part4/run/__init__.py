"""The run around the recipe: what bert_part4_finetune.py's fine_tune and main call that the paper does not say:

    plan               one fine-tuning command across its tasks (each task's family and share), the plan of one task's
                       runs (the data read once, the work split, the runs done before); the processes torchrun starts,
                       and run_cli, every main's frame
    glue_row           Table 1's GLUE row in one command: the lr chosen on dev, the table beside the paper's, the
                       server's files zipped
    training_run       one run around the loop: its log and lines, its share of each batch and DDP, its evaluation
                       cadence, the stop on a signal and when to checkpoint, its results saved
    checkpoint_files   a run's checkpoint files only: written, read back with every RNG state, refused when of other settings
    records            a run's records: Job, Config, Where, its name, the settings recorded with it, a results file
                       never replaced by other settings; the summaries of restarts and grids
    packing            padding-free training steps: every layer but attention on the real tokens only"""
