"""The run around the recipe: what bert_part4_finetune.py's fine_tune and main call that the paper does not say:

    command            one fine-tuning command across its tasks (each task's family and share), the plan of one task's
                       runs (every input checked and the data read once, each run's settings made, the work split, the
                       runs done before)
    run_files          one run's settings and files: Job, TaskConfig, RunSettings (all one run reads, and what its
                       results record), its name, a results file reused for the same settings and never replaced by
                       other ones, its checkpoint written and read back to resume
    training_run       one run around the loop, each step of it a call fine_tune makes: begun or resumed, its preamble,
                       the untrained head's score and its cost; its share of each batch; its evaluations, checkpoints
                       and clean stop; the FINAL line and its results saved
    summaries          what a command's runs add up to: restarts' means, a grid ranked, Table 1's GLUE row (the lr chosen
                       on dev, the table beside the paper's, the server's files zipped)"""
