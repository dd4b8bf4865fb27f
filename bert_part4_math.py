"""BERT, explained - Part 4: the article's arithmetic by hand, and the attention flow across the pair.

Every hand computation of the article, in the order of its reference log part4_math_stdout.txt (in
../shared/article/reference_logs/, beside the article: not in the checkout):
  1a. the GLUE head on a toy C and W (H = 4, K = 3);  1b. the same on a real SST-2 classifier;
  7.  the new weights of each head, counted from the model configs;
  2.  attention flow between question and passage in a SQuAD model ("Where was Ada born?"), and
      the same shares over the first N questions of a SQuAD dev file;
  3a. span scoring on a toy 4-token passage;  3b. the same on the BERT abstract;
  4.  s_null against the best span, at tau = 0 and at the tau chosen on dev;
  5.  the EM and F1 worked examples;  6. the SWAG head on four toy C_k.
  8.  the arithmetic the article does on Tables 1 and 2.
`--only toys` runs 1a, 3a, 5, 6 and 8, which need no model, in well under a second. A model (or the flow's data) that
cannot be used leaves out its own sections only: every other section runs and is written, those left out are said in
one line each and marked in the results (not_run), and the run ends with one line and exit 2.
"""

import sys

from part4.command_line import declarations, script_settings

if __name__ == "__main__":       # --help and a refused flag are answered before torch loads (seconds on a busy machine)
    declarations.answer_now(script_settings.parse_math, sys.argv[1:])

import math
import os
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm
from transformers import BertForMultipleChoice, BertForQuestionAnswering, BertForSequenceClassification

from part4.command_line.declarations import Fatal
from part4.data.readers import file_problem, read_squad
from part4.models import section_inputs
from part4.models.loading import (
    autocast,
    autocast_dtype,
    load_model,
    load_qa_model,
    loaded_record,
    new_head_parameters,
    pick_device,
    precision_note,
    run_cli,
    seed_everything,
)
from part4.output.results_files import (
    UNTRAINED_HEAD,
    Log,
    beside_article,
    check_results_kept,
    check_writable_dir,
    command_line,
    portable,
    pyplot,
    read_results,
    rounded,
)
from part4.paper.article import ARCHITECTURE, NULL_TAU_LABEL, PASSAGE, SQUAD_V1, SST2, TABLE1, TABLE2
from part4.paper.article import MATH_LABELS as ARTICLE
from part4.paper.article import TAU as ARTICLE_TAU
from part4.paper.recipe import MAX_LEN
from part4.tasks import squad_metric, squad_spans

# The toy inputs (printed at the top of the article's math log; as ../shared/article/INPUTS.md, beside the article, lists
# them: not in the checkout).
TOY_C = [0.5, -1.0, 2.0, 0.1]
TOY_W = [[1.0, 0.0, 0.5, 0.0], [0.0, 1.0, -0.5, 2.0], [-0.5, 0.5, 0.0, 1.0]]
TOY_LABEL = 0
TOY_START = [0.5, 1.0, 3.0, 0.2]          # S.T_i for a 4-token passage
TOY_END = [2.8, 0.1, 1.0, 1.5]            # E.T_j
TOY_SPAN = (2, 3)                         # the true span of the toy
SWAG_V = [2.0, -1.0, 0.5, 1.0]
SWAG_C = [[0.9, 0.2, -0.1, 0.4], [-0.3, 0.8, 0.5, -0.6], [0.1, -0.7, 0.9, 0.0], [0.4, 0.1, -0.2, -0.9]]
SST2_SENTENCES = [("a gorgeous, witty, seductive movie.", 1), ("the plot is dull and the acting is worse.", 0)]
FLOW_QUESTION, FLOW_PASSAGE, FLOW_WORD = "Where was Ada born?", "Ada Lovelace was born in London in 1815.", "born"
GOLD_SPANS = [("What does BERT stand for?", "Bidirectional Encoder Representations from Transformers"),
              ("What does BERT learn from?", "unlabeled text")]
NULL_QUESTIONS = ["What does BERT stand for?", "Who won the football world cup in 2018?", "How many layers does BERT have?"]
F1_EXAMPLES = [("The Denver Broncos.", "Denver Broncos"),
               ("Bidirectional Encoder Representations", "Bidirectional Encoder Representations from Transformers"),
               ("the Broncos defeated the Panthers", "Denver Broncos"), ("eight", "2")]
# What the article printed (ARTICLE, from part4/paper/article.py) is shown
# beside ours on every route; its models (SST2, SQUAD_V1) and passage (PASSAGE, the BERT abstract) are there too.


def written_out(v, c):
    """(2)(0.9) + (-1)(0.2) + ...: a dot product with every product shown."""
    return " + ".join(f"({a:g})({b:g})" for a, b in zip(v, c))


def softmax(x):
    e = np.exp(np.asarray(x, float) - np.max(x))
    return e / e.sum()


# --- 1a. The classification layer on a toy: logits = C W^T, P = softmax, loss = -log P(y) ---

def glue_toy(log):
    say = log.say
    say("== 1a. GLUE head, toy: H = 4, K = 3")
    say(f"C = {TOY_C}   (shape ({len(TOY_C)},))")
    say(f"W = {TOY_W}   (shape ({len(TOY_W)}, {len(TOY_C)}))")
    logits = [float(np.dot(TOY_C, w)) for w in TOY_W]           # C W^T
    for k, (w, z) in enumerate(zip(TOY_W, logits)):
        say(f"  logit {k} = C . W[{k}] = {written_out(TOY_C, w)} = {z:.3f}")
    e = np.exp(logits)
    P = e / e.sum()                                              # softmax(C W^T)
    loss = -math.log(P[TOY_LABEL])                               # -log softmax(C W^T)[y]
    say(f"softmax: exp(logits) = {rounded(e, 3)}, sum = {e.sum():.3f}, P = {rounded(P, 3)}"
        f"   [article: P = {ARTICLE['glue_p']}]")
    say(f"correct label y = {TOY_LABEL}: log softmax = {-loss:.3f}, loss = -log P(y) = {loss:.3f}"
        f"   [article: {ARTICLE['glue_loss']}]")
    return {"logits": logits, "p": P.tolist(), "loss": loss}


# --- 1b. The same arithmetic on a real fine-tuned SST-2 classifier ---

@torch.no_grad()
def glue_real(model, tok, name, device, log, fresh):
    log.say(f"\n== 1b. GLUE head, real: {name}   (article: {SST2})")
    if fresh:
        log.say("  (this model has no trained classifier: W and b are new and random, so its logits mean nothing "
                   "and are not the article's kind)")
    out = []
    for (text, gold), art in zip(SST2_SENTENCES, ARTICLE["sst2"]):
        enc = tok(text, return_tensors="pt").to(device)
        library = model(**enc).logits[0]
        C = model.bert(**enc).pooler_output[0]                    # the pooled [CLS] vector, (H,)
        W, b = model.classifier.weight, model.classifier.bias   # (K, H), (K,)
        CW = C @ W.T                                              # C W^T
        logits = CW + b
        P = torch.softmax(logits.float(), -1)
        loss = -torch.log(P[gold]).item()                         # -log P(gold)
        log.say(f'"{text}"  gold label {gold}')
        log.say(f"  C: shape {tuple(C.shape)}, first 8 numbers [{', '.join(f'{x:.3f}' for x in C[:8])}]")
        log.say(f"  W: shape {tuple(W.shape)}, bias [{', '.join(f'{x:.3f}' for x in b)}]")
        log.say(f"  C W^T = [{', '.join(f'{x:.3f}' for x in CW)}], + bias = logits "
                   f"[{', '.join(f'{x:.3f}' for x in logits)}]  (library: [{', '.join(f'{x:.3f}' for x in library)}])"
                   + beside_article(f"C W^T = {art['CW']}, logits {art['logits']}", fresh and UNTRAINED_HEAD))
        log.say(f"  softmax = [{', '.join(f'{x:.4f}' for x in P)}];  loss = -log P(gold) = {loss:.4f}"
                   + beside_article(f"softmax = {art['softmax']}; loss {art['loss']}", fresh and UNTRAINED_HEAD))
        log.say(f"  gap between the two logits: {(logits.max() - logits.min()).item():.2f}"
                   + beside_article(art["gap"], fresh and UNTRAINED_HEAD))
        out.append({"text": text, "gold": gold, "CW": CW.tolist(), "logits_by_hand": logits.tolist(),
                    "logits_library": library.tolist(),
                    "max_gap": (logits - library).abs().max().item(), "p": P.tolist(), "loss": loss})
    return out


# --- 7. How many new weights each head adds, counted from the configs ---

def new_weights(model, log):
    """K x H + K for each head, checked against the layers the library builds from the same config."""
    cfg = model.config
    H = cfg.hidden_size
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    new = sum(p.numel() for p in model.classifier.parameters())
    K = model.config.num_labels
    with torch.device("meta"):                                  # shapes only: no memory, no weights
        heads = {"GLUE, K = 2 (SST-2)": (BertForSequenceClassification(cfg.__class__(**{**cfg.to_dict(), "num_labels": 2})),
                                         "classifier", 2),
                 "GLUE, K = 3 (MNLI)": (BertForSequenceClassification(cfg.__class__(**{**cfg.to_dict(), "num_labels": 3})),
                                        "classifier", 3),
                 "SQuAD (S and E)": (BertForQuestionAnswering(cfg), "qa_outputs", 2),
                 "SWAG (one vector V)": (BertForMultipleChoice(cfg), "classifier", 1)}
    log.say(f"\n== 7. SST-2 model: {total:,} weights in total; {new:,} are new (K x H + K = {K} x {H} + {K}); "
               f"{trainable:,} have requires_grad = True during fine-tuning"
               + (" (all of them)" if trainable == total else "")
               + beside_article(f"{ARTICLE['weights']['total']} in total, {ARTICLE['weights']['new']} new, for BERT-base, "
                         f"H = {ARCHITECTURE['hidden']}"))
    counts = {}
    for label, (m, attr, k) in heads.items():
        counted = sum(p.numel() for p in getattr(m, attr).parameters())
        counts[label] = {"formula": new_head_parameters(k, H), "counted": counted}
        log.say(f"  new weights, {label}: {counted:,}"
                   + beside_article(f"{ARTICLE['weights'][label]} with H = {ARCHITECTURE['hidden']}"))
    return {"total": total, "new": new, "trainable": trainable, "H": H, "heads": counts}


# --- 2. Attention flow across the packed pair [CLS] question [SEP] passage [SEP] ---

def block_share(A, rows, cols):
    """For each token in rows: the share of its attention that goes to cols, averaged over heads.
    A: (heads, T, T), each row a softmax."""
    return A[:, rows][:, :, cols].sum(-1).mean(0)             # (len(rows),)


def flow_shares(attentions, q, p, special):
    """Per layer: question -> passage, passage -> question, question -> [CLS]/[SEP], question -> question."""
    layers = []
    for layer, A in enumerate(attentions, start=1):             # A: (heads, T, T)
        layers.append({"layer": layer, "q_to_p": block_share(A, q, p).mean().item(),
                       "p_to_q": block_share(A, p, q).mean().item(),
                       "q_to_special": block_share(A, q, special).mean().item(),
                       "q_to_q": block_share(A, q, q).mean().item()})
    return layers


def segment_positions(enc):
    """Positions of the question, the passage and the special tokens, from the sequence ids."""
    ids = enc.sequence_ids(0)
    return ([i for i, s in enumerate(ids) if s == 0], [i for i, s in enumerate(ids) if s == 1],
            [i for i, s in enumerate(ids) if s is None])


@torch.no_grad()
def attention_flow(model, tok, name, device, log):
    enc = tok(FLOW_QUESTION, FLOW_PASSAGE, return_tensors="pt")
    q, p, special = segment_positions(enc)
    tokens = tok.convert_ids_to_tokens(enc["input_ids"][0])
    att = [a[0].float() for a in model(**enc.to(device), output_attentions=True).attentions]   # per layer (heads, T, T)
    layers = flow_shares(att, q, p, special)
    log.say(f"\n== 2. packed pair in {name}   (article: {SQUAD_V1}, {ARCHITECTURE['layers']} layers)")
    log.say(f"tokens: {tokens}")
    log.say(f"segment A (question) positions {q}, segment B (passage) positions {p}")
    for r in layers:
        art = ARTICLE["flow"][r["layer"] - 1] if r["layer"] <= len(ARTICLE["flow"]) else None
        log.say(f"  layer {r['layer']:>2}: question -> passage {r['q_to_p']:.3f}   passage -> question {r['p_to_q']:.3f}"
                   f"   question -> [CLS]/[SEP] {r['q_to_special']:.3f}"
                   + (beside_article(" / ".join(f"{x:.3f}" for x in art)) if art else ""))
    born = [i for i in q if tokens[i] == FLOW_WORD]
    born_share = float(np.mean([block_share(A, born, p).mean().item() for A in att])) if born else None
    if born:
        log.say(f'averaged over all {len(att)} layers and heads, "{FLOW_WORD}" (question) gives {born_share:.3f} '
                   f"of its attention to the passage"
                   + beside_article(f"{ARTICLE['born']}, over {ARCHITECTURE['layers']} layers"))
    return {"tokens": tokens, "layers": layers, "born_to_passage": born_share}


@torch.no_grad()
def flow_over_dev(model, tok, examples, device, log, source):
    """The same shares over many questions: mean and std per layer."""
    per_question = []
    for ex in tqdm(examples, desc="attention flow", file=sys.stderr):
        enc = tok(ex["question"].lstrip(), ex["context"], return_tensors="pt", truncation="only_second",
                  max_length=MAX_LEN)
        att = [a[0].float() for a in model(**enc.to(device), output_attentions=True).attentions]
        per_question.append(flow_shares(att, *segment_positions(enc)))
    log.say(f"the same shares over the first {len(examples)} questions of {source} (mean +- std over questions):")
    rows = []
    for k in range(len(per_question[0])):
        row = {"layer": k + 1}
        for key in ("q_to_p", "p_to_q", "q_to_special"):
            values = [pq[k][key] for pq in per_question]
            row[key], row[key + "_std"] = float(np.mean(values)), float(np.std(values))
        rows.append(row)
        log.say(f"  layer {k + 1:>2}: question -> passage {row['q_to_p']:.3f} +- {row['q_to_p_std']:.3f}   "
                   f"passage -> question {row['p_to_q']:.3f} +- {row['p_to_q_std']:.3f}   "
                   f"question -> [CLS]/[SEP] {row['q_to_special']:.3f} +- {row['q_to_special_std']:.3f}")
    return {"questions": len(examples), "source": source, "layers": rows}


# --- 3a. Span scoring on a toy: score(i, j) = S.T_i + E.T_j, only j >= i ---

def span_toy(log):
    say = log.say
    P_start, P_end = softmax(TOY_START), softmax(TOY_END)
    score = np.add.outer(TOY_START, TOY_END)                     # score[i, j] = S.T_i + E.T_j
    say("\n== 3a. span scoring, toy (4 passage tokens)")
    say(f"S.T_i = {TOY_START}  ->  P_start = [{', '.join(f'{x:.3f}' for x in P_start)}]")
    say(f"E.T_j = {TOY_END}  ->  P_end   = [{', '.join(f'{x:.3f}' for x in P_end)}]")
    say("score(i, j) = S.T_i + E.T_j:")
    for i, row in enumerate(score):
        say(f"  i={i}:" + " ".join(f"{v:6.1f}{'x' if j < i else ' '}" for j, v in enumerate(row)))
    i0, j0 = np.unravel_index(np.argmax(score), score.shape)
    val, i, j = squad_spans.n_best_span_search(torch.tensor([TOY_START]), torch.tensor([TOY_END]),
                                                 torch.ones(1, 4, dtype=torch.bool), n_best=4, max_answer=len(TOY_START))
    i, j, best = int(i[0, 0]), int(j[0, 0]), float(val[0, 0])
    say(f"best without the rule: i={i0}, j={j0} (score {score[i0, j0]:.1f}) -> "
        + ("ends before it starts, not allowed" if j0 < i0 else "allowed"))
    say(f"best with j >= i:      i={i}, j={j} (score {best:.1f});  P_start*P_end = {P_start[i] * P_end[j]:.4f}"
        f"   [article: {ARTICLE['span_best']}]")
    s, e = TOY_SPAN
    loss = -math.log(P_start[s]) - math.log(P_end[e])            # -log P_start(s) - log P_end(e)
    say(f"if the true span is ({s}, {e}): loss = -log {P_start[s]:.4f} - log {P_end[e]:.4f} = {loss:.4f}"
        f"   [article: {ARTICLE['span_loss']}]")
    return {"p_start": P_start.tolist(), "p_end": P_end.tolist(), "best_any": [int(i0), int(j0)],
            "best_any_score": float(score[i0, j0]), "best": [i, j], "best_score": best, "loss": loss}


# --- 3b. The same on the BERT abstract, with a real SQuAD v1.1 model ---

def gold_tokens(offsets, passage, text, answer):
    """First and last token of the answer's characters, among the passage tokens."""
    a = text.index(answer)
    inside = [t for t, (o, on) in enumerate(zip(offsets, passage)) if on and o[0] >= a and o[1] <= a + len(answer)]
    return inside[0], inside[-1]


def span_real(model, tok, name, device, log):
    log.say(f"\n== 3b. span scoring on the abstract, {name}   (article: {SQUAD_V1})")
    out = []
    for n, ((question, gold), art) in enumerate(zip(GOLD_SPANS, ARTICLE["span_real"])):
        d = squad_spans.demo_one(model, tok, question, PASSAGE, device=device, search=squad_spans.SpanSearch())
        passage = d["passage"].tolist()
        gs, ge = gold_tokens(d["offsets"], passage, PASSAGE, gold)
        positions = [t for t, on in enumerate(passage) if on]
        P_start = torch.softmax(d["start"][d["passage"]], -1)   # over the passage tokens
        P_end = torch.softmax(d["end"][d["passage"]], -1)
        ps, pe = P_start[positions.index(gs)].item(), P_end[positions.index(ge)].item()
        loss = -math.log(ps) - math.log(pe)                       # -log P_start(s) - log P_end(e)
        text, i, j, score = d["spans"][0]
        log.say(f'Q: {question}   gold "{gold}" = tokens {gs}..{ge} {d["tokens"][gs:ge + 1]}')
        log.say(f"   S, E: shape ({d['S'].shape[0]},) each; first 4 of S [{', '.join(f'{x:.3f}' for x in d['S'][:4])}], "
                   f"of E [{', '.join(f'{x:.3f}' for x in d['E'][:4])}]")
        log.say(f'   predicted span "{text}" (tokens {i}..{j}, score {score:.2f})' + beside_article(art["span"]))
        log.say(f"   P_start(gold start) = {ps:.4f}, P_end(gold end) = {pe:.4f}, "
                   f"loss = -log P_start - log P_end = {loss:.4f}" + beside_article(art["p"]))
        row = {"question": question, "gold": gold, "gold_tokens": [gs, ge], "predicted": text, "span": [i, j],
               "score": score, "p_start_gold": ps, "p_end_gold": pe, "loss": loss}
        if n == 0:                                                # the window the article draws as a heatmap
            lo, hi = max(0, gs - 4), min(len(passage) - 1, ge + 2)
            row["heatmap"] = {"tokens": d["tokens"][lo:hi + 1], "first": lo, "start": d["start"][lo:hi + 1].tolist(),
                              "end": d["end"][lo:hi + 1].tolist()}
            log.say(f"   heatmap window: tokens {lo}..{hi} {row['heatmap']['tokens']}")
            log.say(f"   start scores S.T_i: [{', '.join(f'{x:.2f}' for x in row['heatmap']['start'])}]")
            log.say(f"   end scores   E.T_j: [{', '.join(f'{x:.2f}' for x in row['heatmap']['end'])}]")
        out.append(row)
    return out


# --- 4. SQuAD v2.0: answer iff s_hat > s_null + tau ---

def chosen_tau(tau, results_dir, squad2_model):
    """The tau of section 4: --tau, else bert_part4_squad.py's best tau for the same model chosen on its full
    dev set (in results_dir), else the article's. A tau chosen on a part of the dev set (--max-dev-examples; limit in the
    results of earlier versions) is not used: the source says so."""
    if tau is not None:
        return tau, "from --tau"
    path = os.path.join(results_dir, "part4_squad.json")
    shown = os.path.join(portable(results_dir), "part4_squad.json")         # as the results record a path
    r = read_results(path)
    if r is not None:
        config = (r.get("run", {}).get("config") or {})
        if "v2_dev" in r and config.get("v2_model") == portable(squad2_model):
            n, tau = r["v2_dev"]["n"], r["v2_dev"]["best"]["tau"]
            if config.get("max_dev_examples", config.get("limit")) is None:
                return tau, f"from bert_part4_squad.py, chosen on all {n} dev questions"
            return ARTICLE_TAU, (f"the article's value: {shown} chose {tau:+.2f} on only the first {n} "
                                 f"questions (--max-dev-examples); run bert_part4_squad.py on the full dev set to use its "
                                 f"own")
    return ARTICLE_TAU, f"the article's value: no {shown} for this model"


def null_scores(model, tok, name, *, device, chosen, log):
    """s_null against the best span at tau = 0 and at the chosen tau; chosen: (tau, where it comes from), as
    chosen_tau gives them."""
    tau, source = chosen
    log.say(f"\n== 4. SQuAD 2.0 no-answer score, {name}; tau chosen on the dev set = {tau:+.2f} ({source})"
               + beside_article(NULL_TAU_LABEL))
    out = []
    for question, art in zip(NULL_QUESTIONS, ARTICLE["null"]):
        d = squad_spans.demo_one(model, tok, question, PASSAGE, device=device, search=squad_spans.SpanSearch())
        (sc, ec), s_null = d["s_null_parts"], d["s_null"]        # s_null = S.C + E.C
        text, i, j, s_hat = d["spans"][0]                         # s_hat = S.T_i + E.T_j
        log.say(f"Q: {question}")
        log.say(f"   s_null = S.C + E.C = {sc:.2f} + {ec:.2f} = {s_null:.2f}" + beside_article(art["s_null"]))
        log.say(f'   best span "{text}": S.T_i + E.T_j = {d["start"][i]:.2f} + {d["end"][j]:.2f} = {s_hat:.2f}'
                   + beside_article(art["s_hat"]))
        decisions = {}
        for t, art_answer in zip((0.0, tau), art["answer"]):
            answer = s_hat > s_null + t
            label = "0:    " if t == 0 else f"{t:+.2f}:"
            log.say(f"   tau = {label} {s_hat:.2f} > {s_null + t:.2f} ?  {'yes -> answer' if answer else 'no -> no answer'}"
                       + beside_article(f"{art_answer}, at tau = {'0' if t == 0 else f'{ARTICLE_TAU:+.2f}'}"))
            decisions[f"{t:+.2f}"] = bool(answer)
        out.append({"question": question, "S_C": sc, "E_C": ec, "s_null": s_null, "best_span": text,
                    "S_T_i": float(d["start"][i]), "E_T_j": float(d["end"][j]), "s_hat": s_hat, "answer": decisions})
    return {"tau": tau, "tau_source": source, "questions": out}


# --- 5. EM and F1, worked out ---

def f1_examples(log):
    log.say("\n== 5. EM and F1")
    out = []
    for (pred, gold), art in zip(F1_EXAMPLES, ARTICLE["f1"]):
        same, n_pred, n_gold = squad_metric.shared_words(pred, gold)
        precision, recall = (same / n_pred if n_pred else 0.0), (same / n_gold if n_gold else 0.0)
        f1, em = squad_metric.squad_f1(pred, gold), squad_metric.exact_match(pred, gold)
        normal = squad_metric.normalize_answer
        log.say(f'pred "{pred}" -> "{normal(pred)}" | gold "{gold}" -> "{normal(gold)}"')
        log.say(f"   shared words {same}, precision {precision:.3f}, recall {recall:.3f}, F1 {f1:.3f}, EM {em}"
                   + beside_article(f"F1 {art}"))
        out.append({"pred": pred, "gold": gold, "shared": same, "precision": precision, "recall": recall,
                    "f1": f1, "em": em})
    return out


# --- 6. SWAG: s_k = V . C_k, softmax across the four endings ---

def swag_toy(log):
    log.say("\n== 6. SWAG, toy: four C_k (H = 4), one vector V")
    scores = [float(np.dot(SWAG_V, c)) for c in SWAG_C]          # s_k = V . C_k
    for k, (c, s) in enumerate(zip(SWAG_C, scores), start=1):
        log.say(f"  s_{k} = V . C_{k} = {written_out(SWAG_V, c)} = {s:.2f}")
    P = softmax(scores)                                          # across the four choices
    loss = -math.log(P[0])
    log.say(f"softmax over the four = [{', '.join(f'{x:.3f}' for x in P)}]; if ending 1 is right, "
               f"loss = -log {P[0]:.3f} = {loss:.3f}   [article: {ARTICLE['swag_p']}, loss {ARTICLE['swag_loss']}]")
    return {"scores": scores, "p": P.tolist(), "loss": loss}


# --- 8. The results tables' arithmetic (Table 1: GLUE averages; Table 2: SQuAD v1.1 test F1) ---

def table_arithmetic(log):
    log.say("\n== 8. the arithmetic of Tables 1 and 2")
    base = TABLE1["OpenAI GPT"]
    gains = {name: TABLE1[name] - base for name in ("BERT-base", "BERT-large")}
    for name, gain in gains.items():
        log.say(f"  Table 1, GLUE average: {name} {TABLE1[name]} - OpenAI GPT {base} = {gain:.1f} points"
                   + beside_article(ARTICLE["table1"][name]))
    ens, top, single = (TABLE2[k] for k in ("BERT ensemble + TriviaQA", "top leaderboard ensemble", "BERT single + TriviaQA"))
    log.say(f"  Table 2, SQuAD v1.1 test F1: BERT ensemble {ens} - top leaderboard ensemble {top} = +{ens - top:.1f}"
               + beside_article(ARTICLE["table2"]))
    log.say(f"  Table 2: BERT single model {single} > top ensemble {top} ? {'yes' if single > top else 'no'}"
               + beside_article(ARTICLE["table2_single"]))
    return {"table1_gains": gains, "table2_margin": ens - top, "single_beats_top": single > top}


def plots(payload, folder):
    """The attention shares per layer and the span-score heatmap, when matplotlib is installed."""
    plt = pyplot()
    if plt is None:
        return
    if "attention" in payload:
        layers = payload["attention"]["layers"]
        fig, ax = plt.subplots(figsize=(7, 4))
        for key, label in (("q_to_p", "question -> passage"), ("p_to_q", "passage -> question"),
                           ("q_to_special", "question -> [CLS]/[SEP]")):
            ax.plot([r["layer"] for r in layers], [r[key] for r in layers], marker="o", label=label)
        ax.set_xlabel("layer")
        ax.set_ylabel("share of attention")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(folder, "part4_math_attention.png"), dpi=120)
        plt.close(fig)
    if "span_real" in payload:
        h = payload["span_real"][0]["heatmap"]
        grid = np.add.outer(h["start"], h["end"])
        grid[np.tril_indices(len(grid), -1)] = np.nan             # j < i: not a span
        fig, ax = plt.subplots(figsize=(7, 6))
        im = ax.imshow(grid, cmap="viridis")
        ax.set_xticks(range(len(h["tokens"])), h["tokens"], rotation=90)
        ax.set_yticks(range(len(h["tokens"])), h["tokens"])
        ax.set_xlabel("end token j")
        ax.set_ylabel("start token i")
        fig.colorbar(im, label="S.T_i + E.T_j")
        fig.tight_layout()
        fig.savefig(os.path.join(folder, "part4_math_span_heatmap.png"), dpi=120)
        plt.close(fig)


# --- The sections that need a model: each runs when its inputs can be used, the others are marked not run ---

# The sections that need a model, by the block of the results they write: (the section, the inputs it reads). A model
# that is refused stops its own sections only (part4/models/section_inputs.py): the toys and every other section still
# run and are written.
RESULTS = "part4_math"             # results/part4_math.log, .json
SECTION_INPUTS = {"glue_real": ("1b", ("--sst2-model",)), "new_weights": ("7", ("--sst2-model",)),
                  "attention": ("2", ("--squad-model", "--flow-data")), "span_real": ("3b", ("--squad-model",)),
                  "null": ("4", ("--squad2-model",))}
NEEDS_BERT = {"--sst2-model": "section 1b reads BERT's pooler, bert.pooler",
              "--squad-model": "section 2 reads BERT's attention over [CLS] question [SEP] passage [SEP]"}


def load_sst2_model(folder, device):
    """Section 1b's SST-2 classifier, with the checkpoint's classifier layer where it has one (else a new one)."""
    model, head = load_model(BertForSequenceClassification, folder.name, folder.flag, head="either")
    return model.to(device).eval(), head


@dataclass
class Models:
    """The models the sections that need one read, as main prepared them: where they run, each model's folder read
    ({flag: ModelFolder}), those loaded, the inputs that cannot be used and the sections they stop, the flow's data
    file (None: the Hub's) and dev questions, the tau; the autocast dtype of their forward passes (None: fp32)."""
    device: object
    dtype: object
    folders: dict
    loaded: dict
    problems: dict
    not_run: dict
    flow_data: str | None
    flow_examples: list
    chosen: tuple


def prepared_models(models, flow, *, where, tau, results_dir, log):
    """Every model and input read before any section runs, the flow's data first; a refused one stops its own sections
    only, said here. models: {flag: name} of --sst2-model, --squad-model, --squad2-model, each loaded on its folder's
    own weights and head (the v1.1 model's attention eager: section 2 reads its probabilities); flow: (questions,
    data file) of the attention flow over a dev file; where: (--device, --dtype) as asked; tau: --tau (None:
    chosen_tau looks in results_dir)."""
    (flow_questions, flow_data), device = flow, pick_device(where[0])
    flow_problem = flow_questions and file_problem(flow_data, "--flow-data", "rajpurkar/squad")
    folders, problems = section_inputs.read_models(models, NEEDS_BERT, {"--flow-data": flow_problem} if flow_problem else {})
    seed_everything(0)
    flow_examples = read_squad(flow_data, "1.1", "--flow-data")[:flow_questions] if flow_questions and not flow_problem else []
    chosen = chosen_tau(tau, results_dir, models["--squad2-model"])             # (tau, where it comes from)
    loaders = {"--sst2-model": lambda f: load_sst2_model(f, device),
               "--squad-model": lambda f: load_qa_model(f, device, MAX_LEN, attn_implementation="eager"),
               "--squad2-model": lambda f: load_qa_model(f, device, MAX_LEN)}
    loaded, problems = section_inputs.load_models(loaders, folders, SECTION_INPUTS, problems)
    not_run = section_inputs.sections_not_run(SECTION_INPUTS, problems)
    sst2, qa = loaded.get("--sst2-model"), "the checkpoint's start and end vectors S, E, kept"
    heads = {"--sst2-model": "the checkpoint's classifier layer, kept" if sst2 and sst2[1].kept else "a new classifier layer",
             "--squad-model": qa, "--squad2-model": qa}
    for line in section_inputs.first_lines(folders, loaded, heads, sections=SECTION_INPUTS, not_run=not_run):
        log.say(line)
    dtype = autocast_dtype(device, where[1])
    if note := precision_note(device, dtype):      # bf16 where it is emulated: one line, slow
        log.say(note)
    return Models(device=device, dtype=dtype, folders=folders, loaded=loaded, problems=problems, not_run=not_run,
                  flow_data=flow_data, flow_examples=flow_examples, chosen=chosen)


def results_before(results_dir, config):
    """The results folder checked writable, and the results a run before wrote there (None: none), checked: where they
    hold a section that read a model and this run reads models too (--only all), results of other settings (the
    models, tau, flow, dtype) are never replaced (part4/output/results_files.py check_results_kept); the settings of a
    run that read none (--only toys, or every model refused) are not compared (sections_run keeps the sections run
    before)."""
    check_writable_dir(results_dir, "--results-dir")
    path = os.path.join(results_dir, RESULTS + ".json")
    saved = read_results(path)
    read_models = saved is not None and any(block in saved for block in SECTION_INPUTS)
    if read_models and config.get("only") != "toys":
        check_results_kept(path, config, ignore=("device", "results_dir", "only"))
    return saved


def sections_run(m, saved, results_dir):
    """{block: whether this run runs its section}: each whose inputs can be used (m: the Models, None with --only
    toys). A section run before (in saved) is never replaced by a run that leaves it out (--only toys, or an input
    that cannot be used now): refused before any section runs, naming them."""
    runs = {block: m is not None and block not in m.not_run for block in SECTION_INPUTS}
    dropped = [SECTION_INPUTS[block][0] for block in SECTION_INPUTS if saved and block in saved and not runs[block]]
    path = os.path.join(results_dir, RESULTS + ".json")
    if dropped:
        raise Fatal(f"{path}: holds section{'s' if len(dropped) > 1 else ''} {', '.join(dropped)}, run before, which "
                    f"this run does not run; refusing to replace {'them' if len(dropped) > 1 else 'it'}: pass "
                    f"--results-dir, or delete it")
    return runs


def main(argv=None):
    args = script_settings.parse_math(argv)   # the command line as settings, without torch (part4/command_line)
    saved = results_before(args.results_dir, command_line(argv, vars(args))["config"])   # not replaced by other settings
    log = Log(RESULTS, args.results_dir)
    models = {"--sst2-model": args.sst2_model, "--squad-model": args.squad_model, "--squad2-model": args.squad2_model}
    name = {flag: portable(given) for flag, given in models.items()}                  # as the log names them
    m = prepared_models(models, (args.flow_questions, args.flow_data), where=(args.device, args.dtype), tau=args.tau,
                        results_dir=args.results_dir, log=log) if args.only == "all" else None
    runs = sections_run(m, saved, args.results_dir)          # each whose inputs can be used, none run before left out
    payload = {"glue_toy": glue_toy(log)}
    payload |= {"models": {flag: loaded_record(m.folders[flag]) for flag in m.loaded}, "dtype": args.dtype} if m else {}
    if runs["glue_real"]:        # each section that runs a model: under autocast (--dtype; fp32 by default); no toy
        sst2, head = m.loaded["--sst2-model"]
        with autocast(m.device, m.dtype):
            payload["glue_real"] = glue_real(sst2, m.folders["--sst2-model"].tokenizer, name["--sst2-model"],
                                             device=m.device, log=log, fresh=not head.kept)
        payload["new_weights"] = new_weights(sst2, log)
    if runs["attention"]:
        qa, tok = m.loaded["--squad-model"]
        with autocast(m.device, m.dtype):
            payload["attention"] = attention_flow(qa, tok, name["--squad-model"], device=m.device, log=log)
            if m.flow_examples:
                payload["attention"]["dev"] = flow_over_dev(qa, tok, m.flow_examples, device=m.device, log=log,
                                                            source=portable(m.flow_data) or "rajpurkar/squad (validation)")
    payload["span_toy"] = span_toy(log)
    if runs["span_real"]:                                   # the model and its tokenizer, as loaded
        with autocast(m.device, m.dtype):
            payload["span_real"] = span_real(*m.loaded["--squad-model"], name["--squad-model"], device=m.device, log=log)
    if runs["null"]:
        with autocast(m.device, m.dtype):
            payload["null"] = null_scores(*m.loaded["--squad2-model"], name["--squad2-model"], device=m.device,
                                          chosen=m.chosen, log=log)
    payload |= {"f1_examples": f1_examples(log), "swag_toy": swag_toy(log), "tables": table_arithmetic(log)}   # in order
    payload |= {"not_run": m.not_run} if m else {}
    os.makedirs(args.results_dir, exist_ok=True)
    plots(payload, args.results_dir)
    written = log.save(payload, cli=command_line(argv, vars(args)), device=m.device if m else None)   # its .json
    if m and m.not_run:
        raise Fatal(section_inputs.not_run_error(SECTION_INPUTS, m.problems, m.not_run, portable(written)))
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
