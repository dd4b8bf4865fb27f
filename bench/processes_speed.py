"""Benchmark: one process against N processes under torchrun, the same fine-tuning steps, side by side.

Both train the same model on the same batches with the same global batch size: one process as a user
runs it (python bert_part4_finetune.py ...), N processes as torchrun runs them (each takes 1/N of every
batch; DistributedDataParallel; gloo on the CPU, nccl on GPUs). The script prints training steps/s of
each and the ratio. On a CPU whose cores one process already uses, N processes cannot be faster: the
ratio measures what the all-reduce costs.

    python bench/processes_speed.py --model path/to/bert --steps 20             # MRPC pairs, batch 32
    python bench/processes_speed.py --random-base --nproc 2 --device cuda       # BERT-base, two GPUs
"""

import argparse
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from finetune_speed import add_model_flags, time_steps, tokenizer_and_models  # noqa: E402
from transformers import BertForSequenceClassification  # noqa: E402

from part4.data import readers  # noqa: E402
from part4.data.batches import epoch_batches  # noqa: E402
from part4.models.loading import (
    autocast_dtype,  # noqa: E402
    start_processes,  # noqa: E402
)
from part4.tasks import families  # noqa: E402


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_flags(p, "mrpc")
    p.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    p.add_argument("--batch-size", type=int, default=32, help="the global batch (default 32)")
    p.add_argument("--nproc", type=int, default=2, help="processes of the torchrun side (default 2)")
    p.add_argument("--device", default="auto")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def worker(args):
    """The timed steps in this process (one of the processes under torchrun); rank 0 prints a JSON line."""
    device, processes = start_processes(args.device)
    torch.manual_seed(0)
    tok, _, make = tokenizer_and_models(args)
    model = make(BertForSequenceClassification, num_labels=2).to(device).train()
    train = readers.read_split(args.data_dir, args.task, "train")[:args.batch_size * (args.steps + 2)]
    enc = families.encode_glue(tok, train, 128)
    batches = epoch_batches(len(train), args.batch_size, 1, 0)[0][:args.steps + 2]
    dtype = autocast_dtype(device, "auto")
    seconds, *_ = time_steps(model, enc, batches, device, dtype, device.type == "cuda", loss_fn=families.Classification.loss,
                             processes=processes)
    if processes.is_main:
        print(json.dumps({"steps_per_s": args.steps / seconds, "processes": processes.world, "device": str(device.type),
                          "threads": torch.get_num_threads(), "backend": processes.backend or "none"}), flush=True)


def measured(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"benchmark failed: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
    return json.loads([line for line in p.stdout.splitlines() if line.startswith("{")][-1])


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.worker:
        return worker(args)
    me = os.path.abspath(__file__)
    one = measured([sys.executable, me, *argv, "--worker"])
    many = measured([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.nproc}", me,
                     *argv, "--worker"])
    print(f"model {args.model or 'random BERT-base'}; task {args.task}; global batch {args.batch_size}; {args.steps} timed "
          f"steps; device {one['device']}; torch {torch.__version__}")
    for label, r in (("one process", one), (f"torchrun, {args.nproc} processes", many)):
        print(f"{label:>24}: {r['steps_per_s']:7.3f} steps/s  ({r['threads']} threads each, backend {r['backend']})")
    print(f"ratio ({args.nproc} processes / one): {many['steps_per_s'] / one['steps_per_s']:.2f}x")


if __name__ == "__main__":
    main()
