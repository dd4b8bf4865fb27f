"""What the scripts print and write:

    results_files   one room, without torch at import: the paths results record, results files read and written
                    atomically (the room a write needs checked first), the log (each line printed and kept, then the
                    .log and .json written), how lines are formatted (our number beside the article's), plots drawn
                    when matplotlib is installed"""
