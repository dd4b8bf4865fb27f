"""The rooms below the four scripts at the root: the fine-tuning command line (cli), its runs (runs), the tasks
and their head families (tasks), the GLUE row (glue), SQuAD's windows and span search (spans), padding-free steps
(packing) and what every script shares (common). Nothing here is run directly: run the scripts at the root."""
