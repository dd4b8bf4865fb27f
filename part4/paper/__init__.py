"""What the paper and the article say, each number and setting in one home that every script reads:

    article          the article's numbers: each as printed, what it measures, where ours comes from; its checkpoints;
                     the labels the scripts print beside ours ([article: ...])
    recipe           the paper's fine-tuning recipe as settings: per task lr, batch, epochs, length; the grids"""
