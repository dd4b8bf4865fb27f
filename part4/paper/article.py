"""The article's numbers, one home: each as printed, what it measures, where it stands, and where ours comes from.

Every `[article: ...]` label the scripts print (built here at the end, from these entries: the heads', SQuAD's and
the math script's labels, the FINAL line's number for a run in the article's setting, the paper's numbers the GLUE and
SQuAD rooms print; or built from the entries where printed, as part4/run/training_run.py names the article's runs)
and every row of the reproduction report (bert_part4_report.py) read from here. An entry is a Number: `value` holds
the digits the article prints (a list or a shape stays one entry), `where` the article's section and the reference log it
comes from (../shared/article/reference_logs), `script` and `field` the script and the place in its results JSON that hold ours.
A field is a dotted path into the JSON (list positions as numbers), or an operation on paths and constants:

    "final.dev.accuracy"                 the value itself
    "neglog span_toy.p_start.2"          -log of it          "exp glue_toy.logits.0"     e to the power of it
    "sumexp glue_toy.logits"             sum of exp(list)    "range glue_real.0.logits_by_hand"   max - min
    "plus null.questions.0.s_null 4"     a + b               "ratio glue.new_params glue.total_params"   a / b
    "concat span_toy.best span_toy.best_score"  both, one after the other

An empty field: the paper's numbers, which no script makes. `kind` says how the report treats it: result (judged),
timing (machine-bound: shown, not judged), random-head (from the article's own random head: not expected to match),
noise (float rounding of a check: ours need only be as small), paper (the paper's or a model page's number, quoted:
the reference, nothing to re-run).
"""

import re
from dataclasses import dataclass

from part4.paper.recipe import GLUE_BATCH_SIZE, GLUE_EPOCHS, lr_tag

BERT = "bert-base-uncased"                         # the pre-trained model the article fine-tunes
SST2 = "textattack/bert-base-uncased-SST-2"        # the article's public checkpoints (as ../shared/article/INPUTS.md,
SQUAD_V1 = "csarron/bert-base-uncased-squad-v1"    # beside the article, lists them: not in the checkout)
SQUAD_V2 = "deepset/bert-base-uncased-squad2"

# The article's passage for the span head and the SQuAD questions: the BERT paper's abstract.
PASSAGE = ("We introduce a new language representation model called BERT, which stands for "
           "Bidirectional Encoder Representations from Transformers. BERT is designed to pre-train "
           "deep bidirectional representations from unlabeled text by jointly conditioning on both "
           "left and right context in all layers. It obtains new state-of-the-art results on eleven "
           "natural language processing tasks, including pushing the GLUE score to 80.5% and SQuAD "
           "v1.1 question answering Test F1 to 93.2.")

FINETUNE, HEADS, SQUAD, MATH = "bert_part4_finetune.py", "bert_part4_heads.py", "bert_part4_squad.py", "bert_part4_math.py"


@dataclass(frozen=True)
class Number:
    key: str
    value: str               # the digits the article prints
    what: str                # what it measures
    where: str               # the article's section (and reference log)
    script: str = ""         # the script whose results JSON holds ours ("" for the paper's numbers)
    field: str = ""          # where in that JSON (see the module's docstring)
    kind: str = "result"     # result | timing | random-head | noise | paper
    model: str = ""          # the checkpoint the article's number is for ("" = needs no model)
    flag: str = ""           # the run.config key that records our model
    match: tuple = ()        # (JSON key, value) pairs that pick the run: (("task", "sst2"), ("lr", 2e-5))
    scale: float = 1.0       # ours times this is what the article prints (100: a fraction printed as a percent)
    n: tuple = ()            # (field, count): ours counts only on the whole dev set (n questions or examples)


# --- The classification layer: the toy, by hand (bert_part4_math.py section 1a) ---

_TOY = "The classification layer: the toy (H = 4, K = 3)"
TOY_GLUE = [Number(f"toy.glue.logit{k}", v, f"toy logit {k} = C . W[{k}]", _TOY, MATH, f"glue_toy.logits.{k}")
            for k, v in enumerate(("1.50", "-1.80", "-0.65"))]
TOY_GLUE += [Number(f"toy.glue.exp{k}", v, f"e^logit {k}", _TOY, MATH, f"exp glue_toy.logits.{k}")
             for k, v in enumerate(("4.482", "0.165", "0.522"))]
TOY_GLUE += [Number("toy.glue.sumexp", "5.169", "the softmax's bottom, sum of e^logits", _TOY, MATH, "sumexp glue_toy.logits"),
             Number("toy.glue.p", "[0.867, 0.032, 0.101]", "softmax(C W^T)", _TOY, MATH, "glue_toy.p"),
             Number("toy.glue.loss", "0.143", "loss -log P(0)", _TOY, MATH, "glue_toy.loss")]

# --- The same arithmetic on textattack/bert-base-uncased-SST-2 (bert_part4_math.py section 1b) ---

_REAL = "The classification layer: a real SST-2 classifier"
SST2_ROWS = (("[-4.316, 4.135]", "[-4.316, 4.135]", "[0.0002, 0.9998]", "0.0002", "8.45"),
         ("[3.883, -3.500]", "[3.883, -3.499]", "[0.9994, 0.0006]", "0.0006", "7.38"))
SST2_REAL = []
for _k, (_cw, _logits, _p, _loss, _gap) in enumerate(SST2_ROWS):
    _m = dict(model=SST2, flag="sst2_model")
    SST2_REAL += [Number(f"sst2.{_k}.CW", _cw, f"sentence {_k + 1}: C W^T, without the bias", _REAL, MATH,
                         f"glue_real.{_k}.CW", **_m),
                  Number(f"sst2.{_k}.logits", _logits, f"sentence {_k + 1}: logits C W^T + b (the library's too)", _REAL,
                         MATH, f"glue_real.{_k}.logits_by_hand", **_m),
                  Number(f"sst2.{_k}.softmax", _p, f"sentence {_k + 1}: softmax", _REAL, MATH, f"glue_real.{_k}.p", **_m),
                  Number(f"sst2.{_k}.loss", _loss, f"sentence {_k + 1}: loss -log P(gold)", _REAL, MATH,
                         f"glue_real.{_k}.loss", **_m),
                  Number(f"sst2.{_k}.gap", _gap, f"sentence {_k + 1}: gap between the two logits", _REAL, MATH,
                         f"range glue_real.{_k}.logits_by_hand", **_m)]

# --- Checking the formula in code: the GLUE and SWAG heads by hand vs the library (bert_part4_heads.py) ---

_CODE = "Checking the formula in code (reference log part4_heads_stdout.txt)"
_H = dict(model=BERT, flag="model")
HEADS_CHECK = [
    Number("heads.C_shape", "(1, 768)", "shape of C, the final [CLS] vector", _CODE, HEADS, "glue.C_shape", **_H),
    Number("heads.W_shape", "(3, 768)", "shape of W, K = 3 labels", _CODE, HEADS, "glue.W_shape", **_H),
    Number("heads.logits", "[-0.1763, -0.9611, 0.0659]", "logits of the random 3-label head, library and by hand", _CODE,
           HEADS, "glue.logits_library", kind="random-head", **_H),
    Number("heads.loss", "1.004374", "loss of the random head, library and by hand", _CODE, HEADS, "glue.loss_library",
           kind="random-head", **_H),
    Number("heads.probs", "[0.366, 0.167, 0.467]", "probabilities of the random head", _CODE, HEADS, "glue.probabilities",
           kind="random-head", **_H),
    Number("heads.raw_logits", "[-0.0016, -0.1106, -0.1406]", "logits from the raw C instead of the pooled C", _CODE,
           HEADS, "glue.logits_raw_C", kind="random-head", **_H),
    Number("heads.new_params", "2,307", "new parameters of a 3-label head, K x H + K", _CODE, HEADS, "glue.new_params", **_H),
    Number("heads.total_params", "109,484,547", "parameters of BERT-base with a 3-label head", _CODE, HEADS,
           "glue.total_params", **_H),
    Number("heads.new_share", "0.0021", "the new parameters' share, in percent", _CODE, HEADS,
           "ratio glue.new_params glue.total_params", scale=100, **_H),
    Number("heads.swag_shape", "(1, 4, 16)", "SWAG input shape (batch, 4 choices, tokens)", _CODE, HEADS,
           "swag.input_shape", **_H),
    Number("heads.swag_scores", "[-0.3572, 0.141, -0.337, -0.0369]", "SWAG scores C.w of the random head", _CODE, HEADS,
           "swag.scores_by_hand", kind="random-head", **_H),
    Number("heads.swag_probs", "[0.198, 0.326, 0.202, 0.273]", "softmax over the 4 choices, random head", _CODE, HEADS,
           "swag.probabilities", kind="random-head", **_H),
]

# --- How many new weights each head adds (bert_part4_math.py section 7) ---

_W = "How many new weights (reference log part4_math_stdout.txt, section 7)"
_M7 = dict(model=SST2, flag="sst2_model")
WEIGHTS = [Number("weights.total", "109,483,778", "weights of the SST-2 model in total", _W, MATH, "new_weights.total", **_M7),
           Number("weights.new", "1,538", "new weights of the SST-2 head", _W, MATH, "new_weights.new", **_M7)]
WEIGHTS += [Number(f"weights.{label}", v, f"new weights, {label}", _W, MATH, f"new_weights.heads.{label}.counted", **_M7)
            for label, v in (("GLUE, K = 2 (SST-2)", "1,538"), ("GLUE, K = 3 (MNLI)", "2,307"),
                             ("SQuAD (S and E)", "1,538"), ("SWAG (one vector V)", "769"))]

# --- Why packing two texts is enough: the attention flow (bert_part4_math.py section 2) ---

_FLOW = "Why packing two texts into one sequence is enough (csarron/bert-base-uncased-squad-v1)"
FLOW_ROWS = ((0.190, 0.107, 0.306), (0.188, 0.072, 0.491), (0.204, 0.091, 0.407), (0.169, 0.122, 0.500),
              (0.148, 0.128, 0.519), (0.170, 0.072, 0.503), (0.088, 0.054, 0.687), (0.062, 0.022, 0.659),
              (0.135, 0.043, 0.603), (0.191, 0.196, 0.414), (0.156, 0.117, 0.690), (0.087, 0.045, 0.740))
FLOW_SHARES = (("q_to_p", "question -> passage"), ("p_to_q", "passage -> question"), ("q_to_special", "question -> [CLS]/[SEP]"))
FLOW = [Number(f"flow.{layer}.{name}", f"{row[c]:.3f}", f"layer {layer}: {words}", _FLOW, MATH,
               f"attention.layers.{layer - 1}.{name}", model=SQUAD_V1, flag="squad_model")
        for layer, row in enumerate(FLOW_ROWS, start=1) for c, (name, words) in enumerate(FLOW_SHARES)]
FLOW.append(Number("flow.born", "0.162", '"born" (question): its share of attention to the passage, 12 layers', _FLOW,
                   MATH, "attention.born_to_passage", model=SQUAD_V1, flag="squad_model"))

# --- SQuAD v1.1: the span toy (bert_part4_math.py section 3a) ---

_SPAN = "SQuAD v1.1: the span toy (4 passage tokens)"
SPAN_TOY = [Number("toy.span.max_any", "5.8", "the largest cell, i = 2, j = 0 (not allowed: j < i)", _SPAN, MATH,
                   "span_toy.best_any_score"),
            Number("toy.span.best", "i=2, j=3 (4.5)", "the best span with j >= i, and its score", _SPAN, MATH,
                   "concat span_toy.best span_toy.best_score"),
            Number("toy.span.best_score", "4.5", "the best allowed score", _SPAN, MATH, "span_toy.best_score"),
            Number("toy.span.p_start", "0.782", "P_start at i = 2", _SPAN, MATH, "span_toy.p_start.2"),
            Number("toy.span.p_end", "0.181", "P_end at j = 3", _SPAN, MATH, "span_toy.p_end.3"),
            Number("toy.span.nlog_start", "0.245", "-log P_start(2)", _SPAN, MATH, "neglog span_toy.p_start.2"),
            Number("toy.span.nlog_end", "1.709", "-log P_end(3)", _SPAN, MATH, "neglog span_toy.p_end.3"),
            Number("toy.span.loss", "1.954", "the loss if (2, 3) is the true span, as the text rounds it", _SPAN, MATH,
                   "span_toy.loss"),
            Number("toy.span.loss4", "1.9543", "the same loss, as the log prints it", _SPAN, MATH, "span_toy.loss")]

# --- SQuAD v1.1: running it on the abstract (bert_part4_squad.py demo) ---

_RUN = "SQuAD v1.1: running it (reference log part4_squad_stdout.txt)"
_V1 = dict(model=SQUAD_V1, flag="v1_model")
_DEMO = (("What does BERT stand for?", "21", "30", "15.16", ("11.21", "10.90"), ("0.989", "0.009", "0.001"),
          ("1.0e-05", "3.6e-07")),
         ("What is the GLUE score of BERT?", "91", "94", "16.81", ("10.68", "10.14"), ("0.996", "0.002", "0.001"),
          ("7.6e-06", "1.2e-08")),
         ("On how many tasks does BERT get new results?", "81", "81", "11.59", ("9.38", "6.92"), ("0.990", "0.002", "0.002"),
          ("8.6e-06", "1.2e-07")),
         ("What does BERT learn from?", "30", "30", "9.87", ("7.65", "6.76"), ("0.810", "0.088", "0.061"),
          ("6.7e-06", "7.5e-08")))
V1_QUESTIONS = [q for q, *_ in _DEMO]
V1_DEMO = [Number("v1.bias", "start +0.0049, end +0.0048", "the span head's bias (start, end)", _RUN, SQUAD, "v1_head.bias",
                  **_V1)]
for _k, (_q, _i, _j, _score, _runners, _top, _gaps) in enumerate(_DEMO):
    _at = f"v1_demo.{_k}"
    V1_DEMO += [Number(f"v1.{_k}.start", _i, f"{_q} answer's first token", _RUN, SQUAD, f"{_at}.spans.0.1", **_V1),
                Number(f"v1.{_k}.end", _j, f"{_q} answer's last token", _RUN, SQUAD, f"{_at}.spans.0.2", **_V1),
                Number(f"v1.{_k}.score", _score, f"{_q} span score S.T_i + E.T_j", _RUN, SQUAD, f"{_at}.spans.0.3", **_V1)]
    V1_DEMO += [Number(f"v1.{_k}.runner{r}", s, f"{_q} runner-up {r} score", _RUN, SQUAD, f"{_at}.spans.{r}.3", **_V1)
                for r, s in enumerate(_runners, start=1)]
    V1_DEMO += [Number(f"v1.{_k}.top{r}", p, f"{_q} P_start of the {r + 1}. likeliest start token", _RUN, SQUAD,
                       f"{_at}.start_top.{r}.1", **_V1) for r, p in enumerate(_top)]
    V1_DEMO += [Number(f"v1.{_k}.{name}", gap, f"{_q} {words}", _RUN, SQUAD, f"{_at}.{name}", kind="noise", **_V1)
                for name, gap, words in zip(("hand_gap", "bias_gap"), _gaps,
                                            ("|S.T_i by hand - model start logit|, largest",
                                             "softmax with vs without the bias, largest difference"))]

# --- SQuAD v1.1 with the gold spans (bert_part4_math.py section 3b) ---

_GOLD = "SQuAD v1.1: the loss on the gold span (reference log part4_math_stdout.txt, section 3b)"
_M3 = dict(model=SQUAD_V1, flag="squad_model")
SPAN_REAL = []
for _k, (_tokens, _score, _p_start, _p_end, _loss) in enumerate((("21..30", "15.16", "0.9893", "0.9661", "0.0453"),
                                                                  ("30..30", "9.87", "0.0615", "0.0407", "5.9909"))):
    _q, _at = f"question {_k + 1}", f"span_real.{_k}"
    SPAN_REAL += [Number(f"gold.{_k}.tokens", _tokens, f"{_q}: predicted tokens", _GOLD, MATH, f"{_at}.span", **_M3),
                  Number(f"gold.{_k}.score", _score, f"{_q}: predicted span's score", _GOLD, MATH, f"{_at}.score", **_M3),
                  Number(f"gold.{_k}.p_start", _p_start, f"{_q}: P_start(gold start)", _GOLD, MATH, f"{_at}.p_start_gold",
                         **_M3),
                  Number(f"gold.{_k}.p_end", _p_end, f"{_q}: P_end(gold end)", _GOLD, MATH, f"{_at}.p_end_gold", **_M3),
                  Number(f"gold.{_k}.loss", _loss, f"{_q}: loss -log P_start - log P_end", _GOLD, MATH, f"{_at}.loss",
                         **_M3)]

# --- Scoring on the full SQuAD v1.1 dev set: EM and F1 worked out (bert_part4_math.py section 5), then the dev score ---

_F1 = "Scoring on the full SQuAD v1.1 dev set: EM and F1 worked out"
F1_ROWS = (("2", "1.000", "1.000", "1.000", "1"), ("3", "1.000", "0.600", "0.750", "0"),
            ("1", "0.333", "0.500", "0.400", "0"), ("0", "0.000", "0.000", "0.000", "0"))
F1_EXAMPLES = [Number(f"f1.{k}.{name}", row[c], f"example {k + 1}: {name}", _F1, MATH, f"f1_examples.{k}.{name}")
               for k, row in enumerate(F1_ROWS) for c, name in enumerate(("shared", "precision", "recall", "f1", "em"))]
F1_EXAMPLES += [Number("f1.1.recall_text", "0.6", "example 2: recall, as the text's arithmetic writes it", _F1, MATH,
                       "f1_examples.1.recall"),
                Number("f1.1.f1_text", "0.75", "example 2: F1, as the text's arithmetic writes it", _F1, MATH,
                       "f1_examples.1.f1")]

_DEV1 = "Scoring on the full SQuAD v1.1 dev set (reference log part4_squad_stdout.txt)"
_N1 = ("v1_dev.n", 10570)
# The dev set's size and its window count depend on the data and the tokenizer only (every checkpoint here has
# bert-base-uncased's vocabulary), not on the model's weights.
V1_DEV = [Number("v1.dev.n", "10570", "questions in the v1.1 dev set", _DEV1, SQUAD, "v1_dev.n", n=_N1),
          Number("v1.dev.n_text", "10,570", "the same, in the text", _DEV1, SQUAD, "v1_dev.n", n=_N1),
          Number("v1.dev.windows", "10753", "windows of 384 tokens, stride 128, over the dev set (the tokenizer's)",
                 _DEV1, SQUAD, "v1_dev.windows", n=_N1),
          Number("v1.dev.em", "80.79", "v1.1 dev EM", _DEV1, SQUAD, "v1_dev.em", n=_N1, **_V1),
          Number("v1.dev.f1", "88.08", "v1.1 dev F1", _DEV1, SQUAD, "v1_dev.f1", n=_N1, **_V1),
          Number("v1.dev.minutes", "9.3", "minutes to score the v1.1 dev set", _DEV1, SQUAD, "v1_dev.seconds", kind="timing",
                 scale=1 / 60, n=_N1, **_V1),
          Number("v1.dev.page", "EM 80.91, F1 88.23", "the checkpoint's model page, its own evaluation code", _DEV1,
                 kind="paper")]

# --- Table 2, quoted ---

_T2 = "Table 2 (the paper's SQuAD v1.1 results, quoted)"
TABLE2 = {"BERT ensemble + TriviaQA": 93.2, "top leaderboard ensemble": 91.7, "BERT single + TriviaQA": 91.8}
# The article's reading of Table 2's single model against the top ensemble, in its words (a sentence of the paper it quotes)
TABLE2_SENTENCE = "our single BERT model outperforms the top ensemble system in terms of F1 score"
PAPER_V1 = [Number("table2.base_dev", "EM 80.8, F1 88.5", "BERT-base dev, v1.1 (Table 2)", _T2, kind="paper")]
PAPER_V1 += [Number(f"table2.{name}", f"{v}", f"{name}, test F1", _T2, kind="paper") for name, v in TABLE2.items()]
PAPER_V1.append(Number("table2.margin", "+1.5", "BERT ensemble minus the top leaderboard ensemble, test F1", _T2, MATH,
                       "tables.table2_margin"))

# --- SQuAD v2.0: the no-answer score on the abstract (bert_part4_squad.py demo, bert_part4_math.py section 4) ---

_NULL = "SQuAD v2.0: when there is no answer (reference log part4_squad_stdout.txt)"
_V2 = dict(model=SQUAD_V2, flag="v2_model")
_V2_DEMO = (("What does BERT stand for?", "10.18", "23.25", "+13.07"),
            ("What is the GLUE score of BERT?", "11.64", "22.88", "+11.24"),
            ("Who won the football world cup in 2018?", "21.13", "1.22", "-19.92"),
            ("How many layers does BERT have?", "13.19", "16.16", "+2.97"))
V2_QUESTIONS = [q for q, *_ in _V2_DEMO]
V2_DEMO = [Number(f"v2.{k}.{name}", row[c], f"{row[0]} {name}", _NULL, SQUAD, f"v2_demo.{k}.{name}", **_V2)
           for k, row in enumerate(_V2_DEMO) for c, name in enumerate(("s_null", "s_hat", "difference"), start=1)]

_RULE = "SQuAD v2.0: the rule with real numbers (reference log part4_math_stdout.txt, section 4)"
TAU = 4.0                                 # the tau the article chose on the v2.0 dev set
_M4 = dict(model=SQUAD_V2, flag="squad2_model")
NULL_ROWS = (("5.08", "5.10", "10.18", "11.69", "11.56", "23.25", "14.18", ("yes", "yes")),
              ("10.51", "10.63", "21.13", "0.33", "0.89", "1.22", "25.13", ("no", "no")),
              ("6.61", "6.58", "13.19", "8.45", "7.71", "16.16", "17.19", ("yes", "no")))
NULL = []
for _k, (_sc, _ec, _sn, _st, _et, _sh, _bar, _answers) in enumerate(NULL_ROWS):
    _at = f"null.questions.{_k}"
    NULL += [Number(f"null.{_k}.S.C", _sc, f"question {_k + 1}: S.C", _RULE, MATH, f"{_at}.S_C", **_M4),
             Number(f"null.{_k}.E.C", _ec, f"question {_k + 1}: E.C", _RULE, MATH, f"{_at}.E_C", **_M4),
             Number(f"null.{_k}.s_null", _sn, f"question {_k + 1}: s_null = S.C + E.C", _RULE, MATH, f"{_at}.s_null", **_M4),
             Number(f"null.{_k}.S.T_i", _st, f"question {_k + 1}: S.T_i of the best span", _RULE, MATH, f"{_at}.S_T_i",
                    **_M4),
             Number(f"null.{_k}.E.T_j", _et, f"question {_k + 1}: E.T_j of the best span", _RULE, MATH, f"{_at}.E_T_j",
                    **_M4),
             Number(f"null.{_k}.s_hat", _sh, f"question {_k + 1}: s_hat, the best span's score", _RULE, MATH,
                    f"{_at}.s_hat", **_M4),
             Number(f"null.{_k}.bar", _bar, f"question {_k + 1}: s_null + tau, tau = +4.00", _RULE, MATH,
                    f"plus {_at}.s_null {TAU}", **_M4)]
    NULL += [Number(f"null.{_k}.answer{t}", a, f"question {_k + 1}: answered at tau = {t}", _RULE, MATH,
                    f"{_at}.answer.{t}", **_M4) for t, a in zip(("+0.00", f"{TAU:+.2f}"), _answers)]

# --- Choosing tau on the SQuAD v2.0 dev set ---

_DEV2 = "Choosing tau on the dev set (reference log part4_squad_stdout.txt)"
_N2 = ("v2_dev.n", 11873)
V2_DEV = [Number("v2.dev.n", "11873", "questions in the v2.0 dev set", _DEV2, SQUAD, "v2_dev.n", n=_N2),
          Number("v2.dev.n_text", "11,873", "the same, in the text", _DEV2, SQUAD, "v2_dev.n", n=_N2),
          Number("v2.dev.noans", "5945", "dev questions without an answer", _DEV2, SQUAD, "v2_dev.n_noans", n=_N2),
          Number("v2.dev.noans_text", "5,945", "the same, in the text", _DEV2, SQUAD, "v2_dev.n_noans", n=_N2),
          Number("v2.dev.at0_f1", "78.47", "F1 at tau = 0", _DEV2, SQUAD, "v2_dev.at0.f1", n=_N2, **_V2),
          Number("v2.dev.at0_em", "75.47", "EM at tau = 0", _DEV2, SQUAD, "v2_dev.at0.em", n=_N2, **_V2),
          Number("v2.dev.at0_answered", "56.7", "percent of questions answered at tau = 0", _DEV2, SQUAD,
                 "v2_dev.at0.answered", n=_N2, **_V2),
          Number("v2.dev.tau", f"{TAU:+.2f}", "the best tau of the sweep", _DEV2, SQUAD, "v2_dev.best.tau", n=_N2, **_V2),
          Number("v2.dev.best_f1", "78.98", "F1 at the best tau", _DEV2, SQUAD, "v2_dev.best.f1", n=_N2, **_V2),
          Number("v2.dev.best_em", "76.22", "EM at the best tau", _DEV2, SQUAD, "v2_dev.best.em", n=_N2, **_V2),
          Number("v2.dev.best_answered", "52.1", "percent of questions answered at the best tau", _DEV2, SQUAD,
                 "v2_dev.best.answered", n=_N2, **_V2),
          Number("v2.dev.minutes", "8.2", "minutes to score the v2.0 dev set", _DEV2, SQUAD, "v2_dev.seconds",
                 kind="timing", scale=1 / 60, n=_N2, **_V2),
          Number("v2.dev.page", "78.62", "the checkpoint's model page: F1, its own evaluation code", _DEV2, kind="paper"),
          Number("table3.large_dev", "81.9", "BERT-large dev F1, v2.0 (Table 3); the paper gives no BERT-base number", _DEV2,
                 kind="paper")]

# --- SWAG: the toy (bert_part4_math.py section 6) ---

_SWAG = "SWAG: choosing the best ending (the toy, H = 4)"
SWAG_TOY = [Number("toy.swag.p", "[0.596, 0.015, 0.327, 0.063]", "softmax over the four scores V . C_k", _SWAG, MATH,
                   "swag_toy.p"),
            Number("toy.swag.loss", "0.518", "loss if ending 1 is right", _SWAG, MATH, "swag_toy.loss")]

# --- Our own fine-tune: SST-2 and MRPC (bert_part4_finetune.py; logs part4_sst2_stdout.txt, part4_mrpc_lr*_stdout.txt) ---

_FT_SST2 = "Our own fine-tune: SST-2 (reference log part4_sst2_stdout.txt)"
# The FINAL lines: (task, lr) -> accuracy, correct, dev examples, F1, and the text's roundings in percent.
FINAL_ROWS = {("sst2", 2e-5): ("0.9255", "807", "872", "0.9279", ("92.55",)),
               ("mrpc", 2e-5): ("0.8333", "340", "408", "0.8847", ("83.3",)),
               ("mrpc", 3e-5): ("0.8333", "340", "408", "0.8863", ()),
               ("mrpc", 4e-5): ("0.8480", "346", "408", "0.8953", ()),
               ("mrpc", 5e-5): ("0.8701", "355", "408", "0.9094", ("87.0", "90.9"))}
# A fine-tune's numbers are the article's data's only: a run on another dev set (another number of examples) is
# another split, whatever its model.
_DEV_N = {task: ("final.dev.n", int(printed[2])) for (task, _), printed in FINAL_ROWS.items()}
_S = dict(model=BERT, flag="model", match=(("task", "sst2"), ("lr", 2e-5)), n=_DEV_N["sst2"])
_CURVE = ((0, "210", "0.5933", "0.8544", "0.8486", "82"), (-2, "6300", "0.0790", "0.9255", "0.9279", "2888"),
          (-1, "6315", "0.0487", "0.9255", "0.9279", "2894"))
# Counts of the data and the recipe (steps, warmup steps, dev examples) need no model: any checkpoint gives them.
_SC = dict(match=_S["match"], n=_S["n"])
SST2_RUN = [Number("sst2.steps", "6315", "optimiser steps, 3 epochs of batch 32", _FT_SST2, FINETUNE, "steps", **_SC),
            Number("sst2.steps_text", "6,315", "the same, in the text", _FT_SST2, FINETUNE, "steps", **_SC),
            Number("sst2.warmup", "631", "warmup steps, 10%", _FT_SST2, FINETUNE, "warmup_steps", **_SC),
            Number("sst2.before", "0.4908", "dev accuracy before fine-tuning (random classifier layer)", _FT_SST2, FINETUNE,
                   "before.dev.accuracy", kind="random-head", **_S),
            Number("sst2.before_text", "49.1", "the same, in percent, in the text", _FT_SST2, FINETUNE,
                   "before.dev.accuracy", kind="random-head", scale=100, **_S)]
for _pos, _step, _loss, _accuracy, _f1, _seconds in _CURVE:
    _key, _at = f"sst2.curve.{_step}", f"curve.{_pos}"
    SST2_RUN += [Number(f"{_key}.step", _step, "a quoted line of the curve: its step", _FT_SST2, FINETUNE, f"{_at}.step",
                        **_SC),
                 Number(f"{_key}.loss", _loss, f"train loss at step {_step}", _FT_SST2, FINETUNE, f"{_at}.train_loss", **_S),
                 Number(f"{_key}.accuracy", _accuracy, f"dev accuracy at step {_step}", _FT_SST2, FINETUNE,
                        f"{_at}.dev.dev.accuracy", **_S),
                 Number(f"{_key}.f1", _f1, f"dev F1 at step {_step}", _FT_SST2, FINETUNE, f"{_at}.dev.dev.f1", **_S),
                 Number(f"{_key}.seconds", _seconds, f"seconds at step {_step}", _FT_SST2, FINETUNE, f"{_at}.seconds",
                        **{**_S, "kind": "timing"})]
SST2_RUN += [Number("sst2.curve.210.accuracy_text", "85.4", "dev accuracy after the first 210 steps, percent", _FT_SST2,
                    FINETUNE, "curve.0.dev.dev.accuracy", scale=100, **_S),
             Number("sst2.best.accuracy", "93.5", "the best dev accuracy during training, percent", _FT_SST2, FINETUNE,
                    "best_during_training.dev.dev.accuracy", scale=100, **_S),
             Number("sst2.best.step", "2,520", "the step of the best dev accuracy during training", _FT_SST2, FINETUNE,
                    "best_during_training.step", **_S),
             Number("sst2.minutes", "48.3", "training time in minutes (the article's: a GPU other jobs shared)", _FT_SST2,
                    FINETUNE, "seconds", kind="timing", scale=1 / 60, **_S),
             Number("sst2.minutes_text", "48", "the same, in the text", _FT_SST2, FINETUNE, "seconds", kind="timing",
                    scale=1 / 60, **_S),
             Number("sst2.paper_dev", "92.7", "the paper's BERT-base SST-2 dev accuracy (Table 5)", _FT_SST2, kind="paper"),
             Number("sst2.paper_test", "93.5", "the paper's BERT-base SST-2 test accuracy (Table 1)", _FT_SST2, kind="paper")]


_FT_MRPC = "Our own fine-tune: MRPC, the four learning rates (reference logs part4_mrpc_lr*_stdout.txt)"
# The FINAL line's numbers for each run (accuracy, correct, n, F1), then the text's roundings of them in percent
# (accuracy, F1), where it has them.
FINALS = []
for (_task, _lr), (_accuracy, _correct, _n, _f1, _text) in FINAL_ROWS.items():
    _at, _where = f"{_task}.lr{_lr:g}", _FT_SST2 if _task == "sst2" else _FT_MRPC
    _m = dict(model=BERT, flag="model", match=(("task", _task), ("lr", _lr)), n=_DEV_N[_task])
    FINALS += [Number(f"{_at}.accuracy", _accuracy, f"{_task} dev accuracy at the end, lr {_lr:g}", _where, FINETUNE,
                      "final.dev.accuracy", **_m),
               Number(f"{_at}.correct", _correct, f"{_task} dev examples right, lr {_lr:g}", _where, FINETUNE,
                      "final.dev.correct", **_m),
               Number(f"{_at}.n", _n, f"{_task} dev examples", _where, FINETUNE, "final.dev.n", match=_m["match"], n=_m["n"]),
               Number(f"{_at}.f1", _f1, f"{_task} dev F1 at the end, lr {_lr:g}", _where, FINETUNE, "final.dev.f1", **_m)]
    FINALS += [Number(f"{_at}.{name}_text", v, f"the same {words}, in percent, in the text", _where, FINETUNE,
                      f"final.dev.{name}", scale=100, **_m)
               for (name, words), v in zip((("accuracy", "accuracy"), ("f1", "F1")), _text)]
_REPEAT = "Our own fine-tune: MRPC 2e-5 run once before the grid (reference log part4_mrpc_repeat_lr2e-5_stdout.txt)"
_R = dict(model=BERT, flag="model", match=(("task", "mrpc"), ("lr", 2e-5)), n=_DEV_N["mrpc"])
MRPC_REPEAT = [Number("mrpc.repeat.accuracy", "0.8186", "MRPC 2e-5 dev accuracy, the same job run before the grid", _REPEAT,
                      FINETUNE, "final.dev.accuracy", **_R),
               Number("mrpc.repeat.correct", "334", "dev examples right, the same job run before the grid", _REPEAT, FINETUNE,
                      "final.dev.correct", **_R),
               Number("mrpc.repeat.f1", "0.8741", "dev F1, the same job run before the grid", _REPEAT, FINETUNE,
                      "final.dev.f1", **_R),
               Number("mrpc.repeat.accuracy_text", "81.9", "the same accuracy in percent, in the text", _REPEAT, FINETUNE,
                      "final.dev.accuracy", scale=100, **_R),
               Number("mrpc.before", "0.3162", "MRPC dev accuracy before fine-tuning (random classifier layer)", _FT_MRPC,
                      FINETUNE, "before.dev.accuracy", kind="random-head", **_R),
               Number("mrpc.before_text", "31.6", "the same, in percent, in the text", _FT_MRPC, FINETUNE,
                      "before.dev.accuracy", kind="random-head", scale=100, **_R),
               Number("mrpc.paper_dev", "86.7", "the paper's BERT-base MRPC dev accuracy (Table 5)", _FT_MRPC, kind="paper")]

# --- Table 1, quoted, and the arithmetic the text does on it ---

_T1 = "Table 1: the GLUE results (quoted)"
TABLE1 = {"OpenAI GPT": 75.1, "BERT-base": 79.6, "BERT-large": 82.1}          # the rows' GLUE averages
# Table 1's BERT-base row, on the GLUE server's hidden test set, in each task's metric (MNLI: matched, mismatched).
TABLE1_BASE = {"mnli": (84.6, 83.4), "qqp": (71.2,), "qnli": (90.5,), "sst2": (93.5,), "cola": (52.1,), "stsb": (85.8,),
               "mrpc": (88.9,), "rte": (66.4,)}
PAPER_AVERAGE = TABLE1["BERT-base"]       # Table 1, BERT-base: the mean of its columns, WNLI left out
TABLE1_ROWS = [Number(f"table1.{name}", f"{v}", f"{name}: GLUE average (Table 1)", _T1, kind="paper")
               for name, v in TABLE1.items()]
TABLE1_ROWS += [Number("table1.large_mnli", "86.7/85.9", "BERT-large MNLI matched/mismatched test accuracy", _T1, kind="paper"),
                Number("table1.mnli_train", "392", "MNLI training examples, thousands (the table's small print)", _T1,
                       kind="paper"),
                Number("table1.rte_train", "2.5", "RTE training examples, thousands (the table's small print)", _T1,
                       kind="paper")]
TABLE1_ROWS += [Number(f"table1.{name}.gain", v, f"{name} average minus OpenAI GPT's", _T1, MATH,
                       f"tables.table1_gains.{name}") for name, v in (("BERT-base", "4.5"), ("BERT-large", "7.0"))]

# In the article's order.
ENTRIES = (FLOW + TOY_GLUE + SST2_REAL + HEADS_CHECK + WEIGHTS + TABLE1_ROWS + SST2_RUN + FINALS + MRPC_REPEAT
           + SPAN_TOY + V1_DEMO + SPAN_REAL + F1_EXAMPLES + V1_DEV + PAPER_V1 + V2_DEMO + NULL + V2_DEV + SWAG_TOY)
NUMBERS = {e.key: e for e in ENTRIES}


def value(key):
    """The article's digits for one entry, as printed."""
    return NUMBERS[key].value


# --- Published numbers the GLUE rooms print beside ours: not the article's, each with its source ---

# The paper's BERT-base dev accuracies (Table 5; MNLI: matched), where it gives them: the article quotes SST-2's and MRPC's.
PAPER_DEV_NUMBERS = {"sst2": value("sst2.paper_dev"), "mrpc": value("mrpc.paper_dev"), "mnli": "84.4", "qnli": "88.4"}
HF_DEV = "Hugging Face text-classification README, bert-base-cased dev, batch 32, lr 2e-5, 3 epochs, one run"
HF_DEV_NUMBERS = {"cola": "MCC 56.53", "sst2": "accuracy 92.32", "mrpc": "F1 88.85, accuracy 84.07 (5 epochs)",
                  "stsb": "Pearson 88.64, Spearman 88.48", "qqp": "F1 87.49, accuracy 90.71",
                  "mnli": "accuracy 83.91/84.10 (matched/mismatched)", "qnli": "accuracy 90.66", "rte": "accuracy 65.70",
                  "wnli": "accuracy 56.34 (5 epochs)"}


# The article's own spread: the one job it ran twice, (task, lr) -> (low, high) of its two dev accuracies.
SPREAD = {("mrpc", 2e-5): tuple(sorted(float(value(k)) for k in ("mrpc.repeat.accuracy", "mrpc.lr2e-05.accuracy")))}


# --- The article's other numbers: not results, each with its reason (the completeness test reads both lists) ---

NOT_RESULTS = {
    "a year (of a paper, a dataset, or in a quoted text)": ("1815", "2003", "2005", "2009", "2011", "2012", "2013", "2015",
                                                          "2016", "2017", "2018", "2019"),
    "the arXiv id of the paper": ("1810.04805",),
    "a section, part, footnote or reference number": ("3.2", "5", "6", "7", "8", "9", "11", "13", "14", "15", "17", "18",
                                                      "19", "20"),
    "a dataset's name or title (SQuAD 2.0, 'SQuAD: 100,000+ Questions')": ("2.0", "100,000"),
    "from another part of the series (Part 3's 3.3 billion words, its learning rate 1e-4)": ("3.3", "1e-4"),
    "a setting the recipe takes (batch, epochs, learning rates, weight decay, warmup %, clip, dropout, max length, "
    "window and stride, n-best, tau sweep, layers and H of BERT-base)": ("32", "2e-5", "2e-05", "3e-5", "4e-5", "5e-5",
                                                                        "0.01", "10", "0.1", "1.0", "128", "384", "12",
                                                                        "6", "-6", "0.25"),
    "the size of a search grid (2 batch sizes x 3 learning rates x 3 epoch counts = 18 runs)": ("18",),
    "arithmetic of the recipe (3 x 768 = 2,304 weights before the bias)": ("2,304",),
    "a toy input or a code index (INPUTS.md; the code's hidden_states[-1], 10^-5 in the text)": ("0.5", "-1", "-5"),
    "a dataset fact, an input (training and dev sizes, longest input, MRPC's 68% paraphrases, the dev evaluations "
    "a run makes)": ("3,668", "67,349", "67349", "66", "68", "31"),
    "words of the passage or of a quoted question (the BERT abstract's 80.5% and its word piece 80; Super Bowl 50)":
        ("80", "80.5", "50"),
    "the length of our span search in lines of code": ("60",),
}


def numbers_in(text):
    """Every number in a text, as printed ('2,307', '-0.65', '1.0e-05', '21' and '30' of '21..30'); a leading '+' is
    dropped ('+4.00' and '4.00' are one number) and LaTeX's thousands separator read ('2{,}307' is '2,307')."""
    text = text.replace("{,}", ",").replace("..", " .. ")
    return [m.lstrip("+") for m in re.findall(r"(?<![\w.])[-+]?\d+(?:,\d{3})*(?:\.\d+)?(?:e-?\d+)?", text)]


# --- The article's setting: the model and the run its numbers are for (its checkpoints by their weights' sha256 and
# architecture), the optimiser the paper used ---

ARTICLE_MODEL = BERT


@dataclass(frozen=True)
class Published:
    """One of the article's checkpoints as published: the weight file its loading picks (from_pretrained takes
    model.safetensors where the Hub's main branch has one, else pytorch_model.bin), that file's sha256 and size in
    bytes as its Hub page's Git LFS pointer gives them, and where they are quoted. sha256 None: not found; `source`
    says why. A run on a file with this sha256 ran on the article's weights."""
    file: str
    sha256: str | None
    size: int | None
    source: str


PUBLISHED = {
    BERT: Published("model.safetensors", "68d45e234eb4a928074dfd868cead0219ab85354cc53d20e772753c6bb9169d3",
                    440_449_768, "the LFS pointer of google-bert/bert-base-uncased's model.safetensors at revision "
                                 "86b5e0934494bd15c9632b12f734a8a67f723594 (huggingface.co/google-bert/bert-base-uncased"
                                 "/blob/86b5e0934494bd15c9632b12f734a8a67f723594/model.safetensors), quoted with its size "
                                 "in public download scripts that pin it"),
    SST2: Published("pytorch_model.bin", None, None,
                    "not found: the main branch holds pytorch_model.bin alone (last changed in commit de03cb6, June "
                    "2020; the safetensors conversion, refs/pr/2, is an open pull request), and no page or public code reached "
                    "here quotes that file's sha256 (huggingface.co/textattack/bert-base-uncased-SST-2/tree/main)"),
    SQUAD_V1: Published("model.safetensors", "997a8012a07cef470869a18bce1540cf179b41dd7cfdf8256a982c30da04bfeb", None,
                        "the LFS pointer of the safetensors conversion, commit e50328c1be041f7633e303b6950a6d631f0c1bf0 "
                        "(huggingface.co/csarron/bert-base-uncased-squad-v1/blob/e50328c1be041f7633e303b6950a6d631f0c1bf0"
                        "/model.safetensors, 438 MB), merged into main as 836580e on 2023-04-05 (pull request #3)"),
    SQUAD_V2: Published("model.safetensors", "e5c51ef6e3fd67dbe1b18e309a43a34c939ee9f3fa104a785ba859fb50f1f451", None,
                        "the LFS pointer of the safetensors conversion, commit b6915cb0202719a6004f5f35c5e602489ca7461c "
                        "(huggingface.co/deepset/bert-base-uncased-squad2/blob/refs%2Fpr%2F6/model.safetensors, 436 MB), "
                        "merged into main (pull request #6)"),
}

# The four checkpoints' architecture, BERT-base uncased (the paper's Table 1 model; their config.json files): the
# model type, layers L, hidden size H, attention heads A, vocabulary, as the results record a model's.
ARCHITECTURE = {"model_type": "bert", "layers": 12, "hidden": 768, "heads": 12, "vocab": 30522}
# The article's batch size and epochs (the recipe's for GLUE) and its seed: its numbers are for these only. The article
# says "one fixed seed" without naming it: 0, the scripts' default --seed, stands for it.
ARTICLE_RUN = (GLUE_BATCH_SIZE, GLUE_EPOCHS, 0)
ARTICLE_SETTING = f"{BERT}, batch {ARTICLE_RUN[0]}, {ARTICLE_RUN[1]} epochs, seed {ARTICLE_RUN[2]}"
PAPER_OPTIMISER = "the released code's AdamWeightDecayOptimizer, eps 1e-6, no bias correction"


# --- The article's numbers as the scripts print them beside ours ([article: ...]) ---

# an entry group's FINAL numbers as the log prints them: '0.9255 (807/872), F1 0.9279'
ARTICLE_FINAL = {(task, lr): f"{value(at + '.accuracy')} ({value(at + '.correct')}/{value(at + '.n')}), F1 {value(at + '.f1')}"
                 for task, lr in FINAL_ROWS for at in [f"{task}.lr{lr:g}"]}
ARTICLE_REPEAT = {("mrpc", 2e-5): f"{value('mrpc.repeat.accuracy')} ({value('mrpc.repeat.correct')}/"
                                  f"{value('mrpc.lr2e-05.n')}), F1 {value('mrpc.repeat.f1')}"}
ARTICLE_BEFORE = {"sst2": f"dev accuracy {value('sst2.before')}", "mrpc": f"dev accuracy {value('mrpc.before')}"}


def article_final(task, lr):
    """The article's number for this task and learning rate (and its repeat of the same job), labelled."""
    if (task, lr) not in ARTICLE_FINAL:
        return ""
    repeat = f"; the same job run before the grid: {ARTICLE_REPEAT[(task, lr)]}" if (task, lr) in ARTICLE_REPEAT else ""
    return f"   [article ({ARTICLE_SETTING}): {ARTICLE_FINAL[(task, lr)]}{repeat}]"


def article_runs(names):
    """'SST-2 at lr 2e-5 and MRPC at 5e-5..2e-5, batch 32, 3 epochs': the fine-tunes the article printed a FINAL line
    for, from its entries (names: {task: its name as the line gives it}, GLUE's folder names)."""
    lrs = {}
    for task, lr in ARTICLE_FINAL:
        lrs.setdefault(task, []).append(lr)
    runs = [f"{names[t]} at " + (f"lr {lr_tag(v[0])}" if len(v) == 1 else f"{lr_tag(max(v))}..{lr_tag(min(v))}")
            for t, v in lrs.items()]
    return f"{' and '.join(runs)}, batch {ARTICLE_RUN[0]}, {ARTICLE_RUN[1]} epochs"


HEADS_LABELS = {name: value(f"heads.{name}") for name in ("C_shape", "W_shape", "logits", "loss", "probs", "raw_logits",
                                                          "swag_shape", "swag_scores", "swag_probs")}
HEADS_LABELS["new_params"] = (f"{value('heads.new_params')} out of {value('heads.total_params')} "
                              f"({value('heads.new_share')}%)")

SQUAD_LABELS = {
    "bias": value("v1.bias"),
    "v1_demo": {q: value(f"v1.{k}.score") for k, q in enumerate(V1_QUESTIONS)},
    "v1_dev": f"EM {value('v1.dev.em')}, F1 {value('v1.dev.f1')}, {value('v1.dev.windows')} windows, "
              f"{value('v1.dev.minutes')} min",
    "v2_demo": {q: value(f"v2.{k}.difference") for k, q in enumerate(V2_QUESTIONS)},
    "v2_at0": f"F1 {value('v2.dev.at0_f1')}, EM {value('v2.dev.at0_em')}, {value('v2.dev.at0_answered')}%",
    "v2_best": f"tau {value('v2.dev.tau')}, F1 {value('v2.dev.best_f1')}, EM {value('v2.dev.best_em')}, "
               f"{value('v2.dev.best_answered')}%, {value('v2.dev.minutes')} min",
}
WINDOWS_LABEL = f"{value('v1.dev.windows')} windows, no breakdown printed"


MATH_LABELS = {
    "glue_p": value("toy.glue.p"), "glue_loss": value("toy.glue.loss"), "span_best": value("toy.span.best"),
    "span_loss": value("toy.span.loss4"), "swag_p": value("toy.swag.p"), "swag_loss": value("toy.swag.loss"),
    "f1": [value(f"f1.{k}.f1") for k in range(len(F1_ROWS))],
    "sst2": [{name: value(f"sst2.{k}.{name}") for name in ("logits", "softmax", "loss", "gap", "CW")}
             for k in range(len(SST2_ROWS))],
    "weights": {"total": value("weights.total"), "new": value("weights.new")}
    | {label: value(f"weights.{label}") for label in ("GLUE, K = 2 (SST-2)", "GLUE, K = 3 (MNLI)", "SQuAD (S and E)",
                                                      "SWAG (one vector V)")},
    "flow": [tuple(float(value(f"flow.{layer}.{name}")) for name, _ in FLOW_SHARES) for layer in range(1, len(FLOW_ROWS) + 1)],
    "born": value("flow.born"),
    "table1": {name: value(f"table1.{name}.gain") for name in ("BERT-base", "BERT-large")},
    "table2": value("table2.margin"),
    "table2_single": f"yes, '{TABLE2_SENTENCE}'",
    "span_real": [{"span": f'"{text}" (tokens {value(f"gold.{k}.tokens")}, score {value(f"gold.{k}.score")})',
                   "p": f"P_start {value(f'gold.{k}.p_start')}, P_end {value(f'gold.{k}.p_end')}, loss {value(f'gold.{k}.loss')}"}
                  for k, text in enumerate(("Bidirectional Encoder Representations from Transformers", "Transformers"))],
    "null": [{"s_null": f"{value(f'null.{k}.S.C')} + {value(f'null.{k}.E.C')} = {value(f'null.{k}.s_null')}",
              "s_hat": f"{value(f'null.{k}.S.T_i')} + {value(f'null.{k}.E.T_j')} = {value(f'null.{k}.s_hat')}",
              "answer": (value(f"null.{k}.answer+0.00"), value(f"null.{k}.answer{TAU:+.2f}"))} for k in range(len(NULL_ROWS))],
}
NULL_TAU_LABEL = f"{SQUAD_V2}, tau {value('v2.dev.tau')} chosen on all {value('v2.dev.n')} dev questions"

# --- The paper's numbers the GLUE and SQuAD rooms print beside ours ---

PAPER_DEV = "paper, BERT-base dev"
PAPER_TEST = "paper Table 1, BERT-base test (GLUE server)"
PAPER_SQUAD = {"1.1": f"paper, BERT-base dev (Table 2): {value('table2.base_dev')}",
               "2.0": f"paper, BERT-large dev (Table 3): EM 78.7, F1 {value('table3.large_dev')}; the paper gives no "
                      f"BERT-base v2.0 number"}
