"""Reading and batching data:

    readers   each task's data read: GLUE's nine tasks and their TSV files, SWAG's CSV files, SQuAD's JSON, the Hub's
              datasets
    batches   a batch padded to its own longest row, the paper's random batches of every epoch, batches by length;
              padding-free training steps (every layer but attention on a batch's real tokens only)"""
