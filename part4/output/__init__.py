"""What the scripts print and write:

    lines           how lines are formatted: scores, a list as the article prints it, our number beside the article's
    log             the log: each line printed and kept, then the .log and .json written atomically
    results_files   results files and the paths they record, read and written atomically, without torch
    plots           plots, drawn when matplotlib is installed"""
