"""The whole article in one command (bert_part4_reproduce.py) and the report's commands:

    experiments   the experiments that give the article's numbers: each one command, its numbers, its inputs, its size
    calibration   the units of work an experiment does, measured on this device, for the plan's estimates
    stand_in      the article's four models made here from a small BERT, for a machine without the Hub"""
