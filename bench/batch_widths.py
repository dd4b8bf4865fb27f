"""Count the distinct widths of a task's training batches: each batch padded to its own longest input, or that width
rounded up to a multiple of 8 or 16 (--pad-to-multiple-of, the default on CUDA: 8).

A GPU's kernels that plan per shape (cuDNN's attention builds a graph for every new one; CUDA graphs and
torch.compile need a fixed one) see one new shape per distinct width. The paper's random batches of the whole run,
as bert_part4_finetune.py makes them (batch 32, seed 0, inputs cut at 128), on the real GLUE files; a count, not a
time, so it runs on any machine.

    python bench/batch_widths.py --task sst2
    python bench/batch_widths.py --task mrpc --epochs 1
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from transformers import BertTokenizer  # noqa: E402

from part4.data import readers  # noqa: E402
from part4.data.batches import batch_width, epoch_batches  # noqa: E402
from part4.tasks import families  # noqa: E402

SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")


def widths(lengths, batches, multiple, max_width):
    """The width of every batch: its longest row, rounded up to a multiple (collate's batch_width)."""
    return [batch_width(max(lengths[i] for i in idx), multiple, max_width) for idx in batches]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="sst2", help="a GLUE task (default sst2)")
    p.add_argument("--data-dir", default=os.path.join(SHARED, "glue_data"))
    p.add_argument("--vocab", default=os.path.join(SHARED, "bert-base-uncased", "vocab.txt"))
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--max-len", type=int, default=128)
    args = p.parse_args(argv)
    enc = families.encode_glue(BertTokenizer(vocab=args.vocab), readers.read_split(args.data_dir, args.task, "train"),
                          args.max_len)
    lengths = [len(row) for row in enc["input_ids"]]
    batches = [idx for epoch in epoch_batches(len(lengths), args.batch_size, args.epochs, 0) for idx in epoch]
    print(f"{args.task}: {len(lengths)} rows, batch {args.batch_size}, {args.epochs} epoch(s) = {len(batches)} batches")
    for multiple in (1, 8, 16):
        w = widths(lengths, batches, multiple, args.max_len)
        print(f"  widths {'each its own longest' if multiple == 1 else f'rounded up to multiples of {multiple}':>30}: "
              f"{len(set(w)):3d} distinct, mean {sum(w) / len(w):.1f} tokens")


if __name__ == "__main__":
    main()
