"""The article's numbers as the scripts print them beside ours, each built from its entries in part4/paper/article.py: the
`[article: ...]` labels of the heads, SQuAD and math scripts, the FINAL line's number for a run in the article's
setting, and the paper's numbers the GLUE and SQuAD rooms print. No torch here."""



from part4.paper.article import (
    ARTICLE_SETTING,
    F1_ROWS,
    FINAL_ROWS,
    FLOW_ROWS,
    FLOW_SHARES,
    NULL_ROWS,
    SQUAD_V2,
    SST2_ROWS,
    TABLE2_SENTENCE,
    TAU,
    V1_QUESTIONS,
    V2_QUESTIONS,
    value,
)


def final_text(at):
    """'0.9255 (807/872), F1 0.9279': an entry group's FINAL numbers, as the log prints them."""
    return f"{value(at + '.accuracy')} ({value(at + '.correct')}/{value(at + '.n')}), F1 {value(at + '.f1')}"


ARTICLE_FINAL = {(task, lr): final_text(f"{task}.lr{lr:g}") for task, lr in FINAL_ROWS}
ARTICLE_REPEAT = {("mrpc", 2e-5): f"{value('mrpc.repeat.accuracy')} ({value('mrpc.repeat.correct')}/"
                                  f"{value('mrpc.lr2e-05.n')}), F1 {value('mrpc.repeat.f1')}"}
ARTICLE_BEFORE = {"sst2": f"dev accuracy {value('sst2.before')}", "mrpc": f"dev accuracy {value('mrpc.before')}"}


def article_final(task, lr):
    """The article's number for this task and learning rate (and its repeat of the same job), labelled."""
    if (task, lr) not in ARTICLE_FINAL:
        return ""
    repeat = f"; the same job run again: {ARTICLE_REPEAT[(task, lr)]}" if (task, lr) in ARTICLE_REPEAT else ""
    return f"   [article ({ARTICLE_SETTING}): {ARTICLE_FINAL[(task, lr)]}{repeat}]"


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


def _sst2_label(k):
    return {name: value(f"sst2.{k}.{name}") for name in ("logits", "softmax", "loss", "gap")} | {"CW": value(f"sst2.{k}.CW")}


def _null_label(k):
    return {"s_null": f"{value(f'null.{k}.S.C')} + {value(f'null.{k}.E.C')} = {value(f'null.{k}.s_null')}",
            "s_hat": f"{value(f'null.{k}.S.T_i')} + {value(f'null.{k}.E.T_j')} = {value(f'null.{k}.s_hat')}",
            "answer": (value(f"null.{k}.answer+0.00"), value(f"null.{k}.answer{TAU:+.2f}"))}


def _gold_label(k, text):
    return {"span": f'"{text}" (tokens {value(f"gold.{k}.tokens")}, score {value(f"gold.{k}.score")})',
            "p": f"P_start {value(f'gold.{k}.p_start')}, P_end {value(f'gold.{k}.p_end')}, loss {value(f'gold.{k}.loss')}"}


MATH_LABELS = {
    "glue_p": value("toy.glue.p"), "glue_loss": value("toy.glue.loss"), "span_best": value("toy.span.best"),
    "span_loss": value("toy.span.loss4"), "swag_p": value("toy.swag.p"), "swag_loss": value("toy.swag.loss"),
    "f1": [value(f"f1.{k}.f1") for k in range(len(F1_ROWS))],
    "sst2": [_sst2_label(k) for k in range(len(SST2_ROWS))],
    "weights": {"total": value("weights.total"), "new": value("weights.new")}
    | {label: value(f"weights.{label}") for label in ("GLUE, K = 2 (SST-2)", "GLUE, K = 3 (MNLI)", "SQuAD (S and E)",
                                                      "SWAG (one vector V)")},
    "flow": [tuple(float(value(f"flow.{layer}.{name}")) for name, _ in FLOW_SHARES) for layer in range(1, len(FLOW_ROWS) + 1)],
    "born": value("flow.born"),
    "table1": {name: value(f"table1.{name}.gain") for name in ("BERT-base", "BERT-large")},
    "table2": value("table2.margin"),
    "table2_single": f"yes, '{TABLE2_SENTENCE}'",
    "span_real": [_gold_label(0, "Bidirectional Encoder Representations from Transformers"), _gold_label(1, "Transformers")],
    "null": [_null_label(k) for k in range(len(NULL_ROWS))],
}
NULL_TAU_LABEL = f"{SQUAD_V2}, tau {value('v2.dev.tau')} chosen on all {value('v2.dev.n')} dev questions"

# --- The paper's numbers the GLUE and SQuAD rooms print beside ours ---

PAPER_DEV = "paper, BERT-base dev"
PAPER_TEST = "paper Table 1, BERT-base test (GLUE server)"
PAPER_SQUAD = {"1.1": f"paper, BERT-base dev (Table 2): {value('table2.base_dev')}",
               "2.0": f"paper, BERT-large dev (Table 3): EM 78.7, F1 {value('table3.large_dev')}; the paper gives no "
                      f"BERT-base v2.0 number"}
