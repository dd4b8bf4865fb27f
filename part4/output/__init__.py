"""What the scripts print and write:

    log             the log (each line printed and kept, then the .log and .json written atomically), how lines
                    are formatted (our number beside the article's), plots drawn when matplotlib is installed
    results_files   results files and the paths they record, read and written atomically, without torch"""
