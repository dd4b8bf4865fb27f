"""The rooms below the scripts at the root: the fine-tuning recipe's settings (recipe), its command line (cli)
and what every script's command line shares (flags), both without torch; its runs (runs) and the lines they print
(lines), the tasks and their head families (tasks), the GLUE row (glue), SQuAD's windows and span search (spans),
SQuAD's official metric (squad_metric, the standard library only), padding-free steps (packing) and what every
script shares (common). Run the scripts at the root; the one room that runs on its own is the metric, which scores
a predictions file as the official scripts do: python -m part4.squad_metric dev-v2.0.json predictions.json"""
