"""Loading a model, and where it runs (the device, and this process's place among those torchrun starts):

    hub             the Hugging Face Hub, asked as little as possible: offline or reachable, a model in its cache
    loading         a model folder read for what it holds before any weight is loaded (config, weight files, tokenizer);
                    a model loaded from a Hub id or a folder, its loading report checked, its task head as asked; the
                    device, the autocast dtype, the seeds; the processes torchrun starts (joined, left, an error every
                    one stops on), this process's place and what they share; run_cli, the frame of each script that
                    loads torch
    section_inputs  the models a script's sections read, each read and loaded where it can be: a refused one stops
                    only the sections that read it

(BERT's forward on a batch's real tokens only, for padding-free training steps, stands beside the batches it packs:
part4/data/batches.py.)"""
