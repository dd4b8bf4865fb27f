"""Batches: rows padded to their own longest (dynamic padding), a batch of an encoded set, the paper's random batches
of every epoch, and batches of rows of similar length (for evaluation, and for training with --group-by-length)."""


import torch


def padded(rows, length=None, value=0, dtype=torch.long):
    """Rows of different lengths as one (len(rows), length) tensor, each padded at its end with value
    (length: the longest row, unless given)."""
    L = length or max(len(r) for r in rows)
    out = torch.full((len(rows), L), value, dtype=dtype)
    for r, x in enumerate(rows):
        out[r, :len(x)] = torch.tensor(x, dtype=dtype)
    return out


def batch_width(longest, multiple=1, max_width=None):
    """The width a batch is padded to: its longest row, rounded up to a multiple of `multiple` (1: the longest row
    itself, the recipe's dynamic padding), but never past max_width (the longest a row may be), where the longest
    row does not already reach it: 37 -> 40 with multiple 8; 126 -> 128 (127 with max_width 127)."""
    rounded = -(-longest // multiple) * multiple
    return rounded if max_width is None else min(rounded, max(longest, max_width))


def collate(enc, idx, device, pad_to=None, multiple=1, max_width=None):
    """A batch of the rows idx of an encoded set (a dict of columns), padded to the longest of them (or to pad_to;
    multiple, max_width: that width rounded up, batch_width), on the device (to_device). Rows that hold several
    inputs each (SWAG's four) make (batch, inputs, tokens) tensors; enc["targets"] names the columns that are the
    training targets, enc.get("masks") the token masks padded with False (SQuAD's passage). Token ids are padded
    with 0, whatever the tokenizer's padding id: the attention mask leaves the padding out."""
    rows = [enc["input_ids"][i] for i in idx]
    types = [enc["token_type_ids"][i] for i in idx] if "token_type_ids" in enc else None   # none: RoBERTa, DistilBERT
    choices = isinstance(rows[0][0], list)
    if choices:
        rows, types = [r for row in rows for r in row], types and [t for row in types for t in row]
    L = pad_to or batch_width(max(len(r) for r in rows), multiple, max_width)
    batch = {"input_ids": padded(rows, L), **({"token_type_ids": padded(types, L)} if types else {}),
             "attention_mask": padded([[1] * len(r) for r in rows], L)}
    if choices:
        batch = {k: v.view(len(idx), -1, L) for k, v in batch.items()}
    for key in enc["targets"]:
        batch[key] = torch.tensor([enc[key][i] for i in idx])
    for key in enc.get("masks", ()):
        batch[key] = padded([enc[key][i] for i in idx], L, False, torch.bool)
    return to_device(batch, device)


def to_device(batch, device):
    """Every tensor of a batch (made on the host) on the device. On CUDA each is copied from page-locked memory
    without the host waiting for the copy (non_blocking; the copy is queued before the step's kernels, which run
    after it): a plain copy from pageable memory would make the host wait for the device once per tensor. Elsewhere
    .to(device), the tensors themselves on the CPU."""
    if device.type == "cuda":
        return {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}
    return {k: v.to(device) for k, v in batch.items()}


def batches_by_length(rows, batch_size):
    """The rows (token ids; a row of several inputs, SWAG's four, by its longest) sorted by length, cut into batches of
    their indices: each batch carries little padding (for evaluation)."""
    lengths = [max(len(r) for r in row) if isinstance(row[0], list) else len(row) for row in rows]
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def epoch_batches(n, batch_size, epochs, seed, lengths=None, group=50):
    """The shuffled row order of every epoch, cut into batches (the last one of an epoch may be short).

    With lengths: each run of group * batch_size shuffled rows is sorted by length before it is cut, and
    the batches of the epoch are then shuffled, so that a batch holds rows of similar length."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(epochs):
        order = torch.randperm(n, generator=g).tolist()
        if lengths is not None:
            chunk = group * batch_size
            order = [i for start in range(0, n, chunk) for i in sorted(order[start:start + chunk], key=lambda i: lengths[i])]
        batches = [order[i:i + batch_size] for i in range(0, n, batch_size)]
        if lengths is not None:
            batches = [batches[k] for k in torch.randperm(len(batches), generator=g).tolist()]
        out.append(batches)
    return out
