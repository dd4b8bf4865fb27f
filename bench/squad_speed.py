"""Benchmark: our SQuAD evaluation against the article's approach, side by side in one run.

The article's approach (and Google's run_squad.py): every window padded to --max-len, questions
tokenised one by one, and the 20 best starts x 20 best ends searched in a Python loop per window.
Ours (squad_spans.predict, as bert_part4_squad.py runs it): one batched tokenizer call, windows sorted by length and padded per
batch, inference_mode, autocast on CUDA, span search batched on the device.
Both run on the same model and the same first --max-dev-examples questions; the script prints windows/s for
each, the ratio, the share of wall time spent in the model, and how often the two answers agree. With --dtype bf16
ours also runs in fp32, side by side (each warmed first), and the script prints bf16's windows/s against fp32's and how
often their answers agree.

    python bench/squad_speed.py --model path/to/qa_model --max-dev-examples 300
    python bench/squad_speed.py --random-base --vocab ../shared/data/bert-base-uncased/vocab.txt  # BERT-base, random weights
    python bench/squad_speed.py --random-base --dtype bf16 --max-dev-examples 60      # ours in bf16 beside fp32
"""

import argparse
import os
import sys
import time
from dataclasses import replace

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from transformers import AutoTokenizer, BertConfig, BertForQuestionAnswering, BertTokenizer  # noqa: E402

from part4.data import readers  # noqa: E402
from part4.models.loading import (  # noqa: E402
    autocast,
    autocast_dtype,
    load_pretrained,  # noqa: E402
    pick_device,
)
from part4.tasks import squad_spans  # noqa: E402

SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")


def article_predict(model, tok, examples, args, device, dtype):
    """Max-length padding, per-question tokenisation, a Python top-20 x top-20 loop per window."""
    t0 = time.perf_counter()
    windows = []
    for q, ex in enumerate(examples):
        enc = tok(ex["question"].lstrip(), ex["context"], truncation="only_second", max_length=args.max_len,
                  stride=args.stride, return_overflowing_tokens=True, return_offsets_mapping=True, padding="max_length")
        for w in range(len(enc["input_ids"])):
            windows.append((q, enc["input_ids"][w], enc["token_type_ids"][w], enc["attention_mask"][w],
                            enc["offset_mapping"][w], enc.sequence_ids(w)))
    best = [(-np.inf, "") for _ in examples]
    model_seconds = 0.0
    with torch.no_grad():
        for b in range(0, len(windows), args.batch_size):
            chunk = windows[b:b + args.batch_size]
            inputs = {k: torch.tensor([c[n] for c in chunk], device=device)
                      for n, k in ((1, "input_ids"), (2, "token_type_ids"), (3, "attention_mask"))}
            t1 = time.perf_counter()
            with autocast(device, dtype):
                out = model(**inputs)
            starts, ends = out.start_logits.float().cpu().numpy(), out.end_logits.float().cpu().numpy()
            model_seconds += time.perf_counter() - t1
            for (q, _, _, mask, offsets, seq), s, e in zip(chunk, starts, ends):
                s, e = s[:sum(mask)], e[:sum(mask)]                  # the window's own tokens, no padding
                for i in np.argsort(s)[::-1][:args.n_best]:
                    for j in np.argsort(e)[::-1][:args.n_best]:
                        if seq[i] != 1 or seq[j] != 1 or j < i or j - i + 1 > args.max_answer:
                            continue
                        if s[i] + e[j] > best[q][0]:
                            best[q] = (s[i] + e[j], examples[q]["context"][offsets[i][0]:offsets[j][1]])
    return [t for _, t in best], {"windows": len(windows), "model_seconds": model_seconds,
                                  "seconds": time.perf_counter() - t0}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="QA model folder or Hub id")
    p.add_argument("--random-base", action="store_true", help="a randomly initialised BERT-base QA model (speed only)")
    p.add_argument("--vocab", default=os.path.join(SHARED, "bert-base-uncased", "vocab.txt"),
                   help="vocab.txt for --random-base")
    p.add_argument("--data", default=os.path.join(SHARED, "squad", "dev-v1.1.json"), help="SQuAD v1.1 JSON")
    p.add_argument("--max-dev-examples", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto", choices=("auto", "fp32", "bf16", "fp16"),
                   help="autocast of both (default auto: bf16 on CUDA, fp16 on MPS, fp32 on the CPU); bf16: ours in "
                        "fp32 too, side by side")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    args = p.parse_args(argv)
    args.max_len, args.stride, args.n_best, args.max_answer = 384, 128, 20, 30
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    dtype = autocast_dtype(device, args.dtype, inference=True)
    if args.random_base:
        torch.manual_seed(0)
        model, tok = BertForQuestionAnswering(BertConfig()), BertTokenizer(vocab=args.vocab)
        name = "random BERT-base (12 layers, H=768)"
    else:
        model, tok = load_pretrained(BertForQuestionAnswering, args.model), load_pretrained(AutoTokenizer, args.model)
        name = args.model
    model = model.to(device).eval()
    examples = readers.read_squad_json(args.data, "1.1", "--data")[:args.max_dev_examples]
    print(f"model {name}; device {device}; autocast {dtype}; torch threads {torch.get_num_threads()}; "
          f"{len(examples)} questions; batch {args.batch_size}; torch {torch.__version__}")
    search = squad_spans.SpanSearch(max_len=args.max_len, stride=args.stride, batch_size=args.batch_size, n_best=args.n_best,
                              max_answer=args.max_answer, dtype=dtype)
    fp32 = replace(search, dtype=None) if dtype == torch.bfloat16 else None        # ours in fp32 beside bf16
    for way in [search] + ([fp32] if fp32 else []):
        squad_spans.predict(model, tok, examples[:8], way, device=device)         # warm-up
    ours, t_ours = squad_spans.predict(model, tok, examples, search, device=device)
    theirs, t_theirs = article_predict(model, tok, examples, args, device, dtype)
    if fp32:
        ours_fp32, t_fp32 = squad_spans.predict(model, tok, examples, fp32, device=device)
    agree = np.mean([a["text"] == b for a, b in zip(ours, theirs)])
    lengths = [len(w["input_ids"]) for w in squad_spans.make_windows(tok, examples, args.max_len, args.stride)]
    for label, t in (("article's approach", t_theirs), ("ours", t_ours)):
        print(f"{label:>18}: {t['windows']} windows in {t['seconds']:.2f} s = {t['windows'] / t['seconds']:.1f} windows/s; "
              f"model {t['model_seconds']:.2f} s ({100 * t['model_seconds'] / t['seconds']:.1f}% of wall time)")
    print(f"window length: mean {np.mean(lengths):.0f} tokens, max {max(lengths)} (the article pads all to {args.max_len})")
    print(f"speed-up (windows/s, ours / article's): {t_theirs['seconds'] / t_ours['seconds']:.2f}x; "
          f"same answer on {100 * agree:.1f}% of questions")
    if fp32:
        same = np.mean([a["text"] == b["text"] for a, b in zip(ours, ours_fp32)])
        print(f"{'ours, fp32':>18}: {t_fp32['windows']} windows in {t_fp32['seconds']:.2f} s = "
              f"{t_fp32['windows'] / t_fp32['seconds']:.1f} windows/s; model {t_fp32['model_seconds']:.2f} s")
        print(f"bf16 vs fp32 (ours, windows/s): {t_fp32['seconds'] / t_ours['seconds']:.2f}x; same answer on "
              f"{100 * same:.1f}% of questions")


if __name__ == "__main__":
    main()
