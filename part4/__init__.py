"""The rooms below the four scripts at the root: the fine-tuning recipe's settings (recipe), its command line (cli)
and what every script's command line shares (flags), both without torch; its runs (runs) and the lines they print
(lines), the tasks and their head families (tasks), the GLUE row (glue), SQuAD's windows and span search (spans),
padding-free steps (packing) and what every script shares (common). Nothing here is run directly: run the scripts
at the root."""
