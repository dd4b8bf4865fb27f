"""The tasks, each in one of the paper's three head families:

    families          the three head families (classification, multiple choice, span extraction): encode, loss, score;
                      which task is in which (FAMILIES); GLUE's metrics (accuracy, F1, MCC, Pearson, Spearman) and a
                      model's outputs on a GLUE or SWAG dev or test set; GLUE's published numbers and each run's
                      test-set predictions
    squad_spans       SQuAD's windows, span targets, the batched span search, the dev set scored over tau; SQuAD's head
                      family (SpanExtraction), imported for a SQuAD task only
    squad_metric      SQuAD's official metric alone (the standard library only), runnable as the official scripts"""
