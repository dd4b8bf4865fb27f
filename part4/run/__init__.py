"""The run around the recipe: what bert_part4_finetune.py's fine_tune and main call that the paper does not say:

    command            one fine-tuning command across its tasks: where it runs, each task planned, the summaries
    plan               the plan of one task's runs: the data read once, the work split, the runs done before skipped
    training_run       one run around the loop: its log, its share of each batch, its evaluations, checkpoints, results
    checkpoint_files   a run's checkpoint: written, read back with every RNG state, refused when of other settings
    records            a run's records: Job, Config, Where, its name, the settings recorded with it, its results saved
    packing            padding-free training steps: every layer but attention on the real tokens only"""
