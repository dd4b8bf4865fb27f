"""Loading a model, and where it runs (the device, and the processes that share a run):

    hub       the Hugging Face Hub, asked as little as possible: offline or reachable, its cache, its datasets
    folders   a model folder read for what it holds before any weight is loaded (config, weight files, tokenizer)
    loading   a model loaded from a Hub id or a folder, its loading report checked, its task head as asked
    devices   the device, the autocast dtype, the seeds, the processes torchrun starts, and run_cli, every main's frame"""
