"""The whole article in one command (bert_part4_reproduce.py) and its report (bert_part4_report.py):

    experiments   the whole article, declared: each experiment in the article's order, its command, its numbers, its
                  inputs, how its size is measured
    estimates     the estimator: a size in seconds on this device, from the units the calibration measured
    calibration   the units of work an experiment does, measured on this device, for the plan's estimates
    stand_in      the article's four models made here from a small BERT, for a machine without the Hub
    commands      each command the reproduce script runs, as a process of its own: an experiment's (alone or side
                  by side), a stand-in's fine-tune, the report, the calibration
    our_numbers   the results files read and checked whole, and the value of ours each article entry names in one
    statuses      the report's rules: each number of the article beside ours, with its status
    report        the report as it is written: the summary line, REPRODUCTION.md, one run's lines"""
