"""BERT, explained - Part 4: the three output heads, computed by hand and checked against Hugging Face.

Reproduces the article's "Checking the formula in code" (GLUE classifier, paper §3.2 and §4.1),
the SWAG multiple-choice head (§4.4) and the SQuAD span head (§4.2): each head is computed by hand
from the encoder's hidden states and compared with the library's output on the same weights.
A gap above TOLERANCE (fp32's, or bf16's with --dtype bf16) is a failed check: the script says so and exits with code 1.

    python bert_part4_heads.py                      # bert-base-uncased from the Hugging Face Hub
    python bert_part4_heads.py --model path/to/dir  # any local BERT folder (config, weights, vocab)
"""

import sys

from part4.command_line import declarations, script_settings

if __name__ == "__main__":       # --help and a refused flag are answered before torch loads (seconds on a busy machine)
    declarations.answer_now(script_settings.parse_heads, sys.argv[1:])

import os

import torch
from transformers import BertForMultipleChoice, BertForQuestionAnswering, BertForSequenceClassification

from part4.command_line.declarations import Fatal, preflight
from part4.models.loading import (
    autocast,
    autocast_dtype,
    load_model,
    loaded_record,
    model_problem,
    new_head_parameters,
    not_bert,
    pick_device,
    precision_note,
    read_model_folder,
    run_cli,
    seed_everything,
    weights_line,
)
from part4.output.results_files import (
    RANDOM_HEAD,
    Log,
    beside_article,
    check_results_kept,
    check_writable_dir,
    command_line,
    portable,
    rounded,
)
from part4.paper.article import ARCHITECTURE, ARTICLE_MODEL, PASSAGE
from part4.paper.article import HEADS_LABELS as ARTICLE
from part4.tasks.squad_spans import softmax_bias_gap, span_logits

# The article's inputs (as ../shared/article/INPUTS.md, beside the article, lists them: not in the checkout); its passage,
# the BERT abstract, is PASSAGE in part4/paper/article.py.
PAIR = ("A man is playing a guitar.", "A person is making music.")
PAIR_LABEL, K = 0, 3
SWAG_CONTEXT = "She opened the fridge and"
SWAG_ENDINGS = ["took out a carton of milk.", "flew to the moon.", "the fridge sang a song.",
                "painted the ocean blue."]
SPAN_QUESTION = "What does BERT stand for?"
# The largest hand-vs-library gap a check allows: fp32's rounding, or with --dtype bf16 bf16's: 8 significant bits, so
# a logit below 8 is rounded by up to 8 * 2^-8, and the two ways may round at different steps: twice that, 2^-4
TOLERANCE = {"fp32": 1e-4, "bf16": 2 ** -4}
# What the article printed (ARTICLE, from part4/paper/article.py) is shown
# beside ours on every route; the numbers of its randomly initialised head are labelled as not expected to match.


def seeded_bias(bias, seed):
    """A fresh head's bias is 0, and a bias of 0 tests nothing: a by-hand formula that forgets the bias would
    still agree. Draw it instead (seeded), as a trained head's bias would be non-zero."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        bias.copy_(torch.randn(bias.shape, generator=g).to(bias.device))


# --- The classification layer: logits = C W^T (+ bias), loss = -log softmax(C W^T)[y] (paper §4.1) ---

def pool(C, pooler_dense):
    """The pooler: tanh(dense(C)). The released code classifies the pooled C, not C itself."""
    return torch.tanh(pooler_dense(C))                    # (batch, H)


def classifier_logits(pooled, W, b):
    logits = pooled @ W.T + b                             # C W^T (+ bias)
    return logits                                         # (batch, K)


def classification_loss(logits, y):
    return -torch.log_softmax(logits, -1)[0, y]          # -log softmax(C W^T)[y]


# new_head_parameters(K, H) = K * H + K, the new weights of a head (in part4/models/loading.py: the math script counts
# them too).


def load_head(model_class, folder, prefix, *, seed, device, **kwargs):
    """The model with its head: the checkpoint's where it has one of the shape asked, else a new random one (seeded),
    bias included; folder: the model folder, read. Returns the model and its OutputLayer."""
    seed_everything(seed)                                 # the new W is random: seed it
    model, head = load_model(model_class, folder.name, folder.flag, head="either", **kwargs)   # its loading report checked
    if not head.kept:
        seeded_bias(getattr(model, prefix).bias, seed)
    return model.to(device).eval(), head


def load_heads(folder, seed, device):
    """The three models of the article's heads, each with its head as load_head gives it, loaded before the first line
    is printed (so that a refusal comes first): {"glue": (model, head), "swag": ..., "span": ...}."""
    return {"glue": load_head(BertForSequenceClassification, folder, "classifier", seed=seed, device=device,
                              num_labels=K),
            "swag": load_head(BertForMultipleChoice, folder, "classifier", seed=seed, device=device),
            "span": load_head(BertForQuestionAnswering, folder, "qa_outputs", seed=seed, device=device)}


def glue_head(loaded, tok, device, log, *, seed):
    (model, head), fresh = loaded, not loaded[1].kept
    enc = tok(*PAIR, return_tensors="pt").to(device)
    label = torch.tensor([PAIR_LABEL], device=device)
    with torch.no_grad():
        out = model(**enc, labels=label, output_hidden_states=True)
        C = out.hidden_states[-1][:, 0]                   # final vector of [CLS], (1, H)
        W, b = model.classifier.weight, model.classifier.bias   # W: (K, H)
        logits = classifier_logits(pool(C, model.bert.pooler.dense), W, b)
        loss = classification_loss(logits, PAIR_LABEL)
        raw_logits = classifier_logits(C, W, b)           # what the logits would be without the pooler
    H = model.config.hidden_size
    new = new_head_parameters(K, H)
    head_count, total = (sum(p.numel() for p in m.parameters()) for m in (model.classifier, model))
    say = log.say
    say(f"input tokens: {tok.convert_ids_to_tokens(enc['input_ids'][0])}")
    say(f"C (final [CLS] vector): shape {tuple(C.shape)};  W: shape {tuple(W.shape)}  (K = {K} labels, H = {H})"
        + beside_article(f"C {ARTICLE['C_shape']}, W {ARTICLE['W_shape']}"))
    if fresh:
        say(f"W is a new, random layer (seed {seed}{'; ' + head.note if head.note else ''}); its bias is a seeded draw "
            f"too: {rounded(b.detach(), 4)}")
    say(f"logits from the library:  {rounded(out.logits[0], 4)}" + beside_article(ARTICLE["logits"], fresh and RANDOM_HEAD))
    say(f"logits by hand (pooled C): {rounded(logits[0], 4)}" + beside_article(ARTICLE["logits"], fresh and RANDOM_HEAD))
    say(f"loss from the library {out.loss.item():.6f}  vs  -log softmax(C W^T)[label] by hand {loss.item():.6f}"
        + beside_article(ARTICLE["loss"], fresh and RANDOM_HEAD))
    say(f"probabilities ({'untrained W, so they mean nothing yet' if fresh else 'the checkpoint W'}): "
        f"{rounded(torch.softmax(logits[0], -1), 3)}" + beside_article(ARTICLE["probs"], fresh and RANDOM_HEAD))
    say(f"with the raw C instead of the pooled C the logits would be {rounded(raw_logits[0], 4)} "
        f"(the library uses the pooled C)" + beside_article(ARTICLE["raw_logits"], fresh and RANDOM_HEAD))
    say(f"new parameters for this task: {new:,} out of {total:,} ({100 * new / total:.4f}%)"
        + beside_article(f"{ARTICLE['new_params']} for {ARTICLE_MODEL}"))
    return {
        "tokens": tok.convert_ids_to_tokens(enc["input_ids"][0]), "C_shape": list(C.shape), "W_shape": list(W.shape),
        "logits_library": out.logits[0].tolist(), "logits_by_hand": logits[0].tolist(),
        "max_logit_gap": (out.logits - logits).abs().max().item(),
        "loss_library": out.loss.item(), "loss_by_hand": loss.item(), "loss_gap": abs(out.loss.item() - loss.item()),
        "probabilities": torch.softmax(logits[0], -1).tolist(), "logits_raw_C": raw_logits[0].tolist(),
        "new_params": new, "new_params_counted": head_count, "total_params": total, "K": K, "H": H,
        "fresh_head": fresh, "bias": b.detach().tolist(),
    }


# --- SWAG: one vector w scores each of the four endings, softmax across the choices (paper §4.4) ---

def swag_scores(pooled, w, b):
    scores = pooled @ w.T + b                             # (4, 1): one score C_k . w per ending
    return scores


def swag_head(loaded, tok, device, log):
    model, fresh = loaded[0], not loaded[1].kept
    n = len(SWAG_ENDINGS)
    e = tok([SWAG_CONTEXT] * n, SWAG_ENDINGS, return_tensors="pt", padding=True).to(device)
    e = {k: v.unsqueeze(0) for k, v in e.items()}        # (1 example, 4 choices, tokens)
    with torch.no_grad():
        library = model(**e).logits                       # (1, 4)
        flat = {k: v.view(n, -1) for k, v in e.items()}
        T = model.bert(**flat).last_hidden_state          # (4, tokens, H)
        C = pool(T[:, 0], model.bert.pooler.dense)        # (4, H): one C_k per ending
        w, b = model.classifier.weight, model.classifier.bias   # w: (1, H)
        scores = swag_scores(C, w, b).view(1, n)
        probs = torch.softmax(scores, -1)                 # softmax across the 4 choices
    log.say(f"SWAG input: {tuple(e['input_ids'].shape)} = (batch, {n} choices, tokens); the vector w: "
               f"{tuple(w.shape)}" + beside_article(f"{ARTICLE['swag_shape']}, w (1, {ARCHITECTURE['hidden']})"))
    log.say(f"scores C.w by hand: {rounded(scores[0], 4)};  library: {rounded(library[0], 4)}"
               + beside_article(ARTICLE["swag_scores"], fresh and RANDOM_HEAD))
    log.say(f"softmax over the {n} choices ({'untrained w' if fresh else 'the checkpoint w'}): "
               f"{rounded(probs[0], 3)}" + beside_article(ARTICLE["swag_probs"], fresh and RANDOM_HEAD))
    return {"input_shape": list(e["input_ids"].shape), "scores_library": library[0].tolist(),
            "scores_by_hand": scores[0].tolist(), "max_score_gap": (library - scores).abs().max().item(),
            "probabilities": probs[0].tolist()}


# --- The span head: start_i = S . T_i, end_j = E . T_j, W = [S; E] is (2, H) (paper §4.2) ---

# The head by hand lives in part4/tasks/squad_spans.py, where the SQuAD demos read it too: span_logits(T, W, b) takes
# S = W[0] and E = W[1] and gives S.T_i + b[0] and E.T_j + b[1] for every token; softmax_bias_gap says how far the
# bias moves the softmax over the passage (a constant cancels in a softmax).

def span_head(loaded, tok, device, log):
    model, fresh = loaded[0], not loaded[1].kept
    enc = tok(SPAN_QUESTION, PASSAGE, return_tensors="pt", truncation="only_second",
              max_length=model.config.max_position_embeddings).to(device)
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True)
        T = out.hidden_states[-1][0]                      # T_i for every token, (tokens, H)
        W, b = model.qa_outputs.weight, model.qa_outputs.bias   # (2, H), (2,)
        start, end = span_logits(T, W, b)
    passage = (enc["token_type_ids"][0] == 1).nonzero().flatten()[:-1]   # passage tokens, no final [SEP]
    start_gap = (start - out.start_logits[0]).abs().max().item()
    end_gap = (end - out.end_logits[0]).abs().max().item()
    bias_gap = max(softmax_bias_gap(start, b[0], passage), softmax_bias_gap(end, b[1], passage))
    log.say(f"span head: the output layer is {tuple(W.shape)} -> row 0 is the start vector S, row 1 "
               f"the end vector E (H = {W.shape[1]}); bias: start {b[0].item():+.4f}, end {b[1].item():+.4f}"
               + (" (new layer: a seeded draw, so that the bias check tests something)" if fresh else ""))
    log.say(f"Q: {SPAN_QUESTION}  (the BERT abstract as the passage: {len(passage)} passage tokens)")
    log.say(f"   check: |S.T_i by hand - model start logit| max = {start_gap:.1e}; "
               f"|E.T_j by hand - model end logit| max = {end_gap:.1e}")
    log.say(f"   softmax over the passage with vs without bias differs by {bias_gap:.1e}")
    return {"W_shape": list(W.shape), "bias": b.tolist(), "fresh_head": fresh, "passage_tokens": len(passage),
            "max_start_gap": start_gap, "max_end_gap": end_gap, "softmax_bias_gap": bias_gap}


# --- Every hand-vs-library gap is a check, not just a printed number ---

def failed_checks(glue, swag, span, tolerance):
    gaps = {"GLUE logits": glue["max_logit_gap"], "GLUE loss": glue["loss_gap"],
            "SWAG scores": swag["max_score_gap"], "span start logits": span["max_start_gap"],
            "span end logits": span["max_end_gap"], "span softmax with vs without bias": span["softmax_bias_gap"]}
    failed = [f"{k} differ by {v:.1e} > {tolerance:.0e}" for k, v in gaps.items() if not v <= tolerance]
    if glue["new_params"] != glue["new_params_counted"]:
        failed.append(f"K*H + K = {glue['new_params']} but the classifier has {glue['new_params_counted']} parameters")
    return failed


def main(argv=None):
    args = script_settings.parse_heads(argv)   # the command line as settings, without torch (part4/command_line)
    device = pick_device(args.device)
    dtype = autocast_dtype(device, args.dtype)            # None: fp32
    check_writable_dir(args.results_dir, "--results-dir")
    preflight([model_problem(args.model, "--model")])
    folder = read_model_folder(args.model)              # its config, weight files and tokenizer, before any line
    preflight([not_bert(folder, "the hand-computed heads read BERT's pooler, bert.pooler")])
    check_results_kept(os.path.join(args.results_dir, "part4_heads.json"), command_line(argv, vars(args))["config"])
    models, tok = load_heads(folder, args.seed, device), folder.tokenizer
    log = Log("part4_heads", args.results_dir)
    log.say(f"model: {portable(args.model)}   (article: {ARTICLE_MODEL})")
    for line in [weights_line(folder), *folder.notes]:
        log.say(line)
    if note := precision_note(device, dtype):      # bf16 where it is emulated: one line, slow
        log.say(note)
    with autocast(device, dtype):                       # by hand and by the library alike (--dtype; fp32 by default)
        glue = glue_head(models["glue"], tok, device, log, seed=args.seed)
        swag = swag_head(models["swag"], tok, device, log)
        span = span_head(models["span"], tok, device, log)
    tolerance = TOLERANCE[args.dtype]
    failed = failed_checks(glue, swag, span, tolerance)
    for f in failed:
        log.say(f"CHECK FAILED: {f}")
    if failed:
        raise Fatal(f"{len(failed)} hand-vs-library check(s) failed; no results written", code=1)
    log.say(f"all hand-vs-library checks agree within {tolerance:.0e} (model {portable(args.model)}, device {device}"
            + (f", {args.dtype}" if dtype else "") + ")")
    log.save({"model": portable(args.model), "weights": loaded_record(folder), "tolerance": tolerance,
              "dtype": args.dtype, "glue": glue, "swag": swag, "span": span},
             cli=command_line(argv, vars(args)), device=device)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
