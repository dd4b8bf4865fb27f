"""The tasks, each in one of the paper's three head families:

    families          the three head families (classification, multiple choice, span extraction): encode, loss, score
    task_inputs       one task's share of a fine-tuning command (its Config, family, data), and each task's family
    glue_tasks        GLUE's nine tasks: folders, columns, labels, Table 1's metric and number, the test files
    metrics           GLUE's metrics (accuracy, F1, MCC, Pearson, Spearman), a GLUE or SWAG dev set scored
    glue_row          Table 1's GLUE row in one command: the lr chosen on dev, the table beside the paper's
    glue_submission   the GLUE server's files: each run's test-set predictions, the chosen ones zipped
    squad_spans       SQuAD's windows, span targets, the batched span search, the dev set scored over tau
    squad_metric      SQuAD's official metric alone (the standard library only), runnable as the official scripts"""
