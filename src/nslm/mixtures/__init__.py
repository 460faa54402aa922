"""The evaluation models mixed with the NSLM in its tables: caches, the CRNN and NSLM-best's
mixture.

Each is a column of the per-class tables (:mod:`nslm.evaluation.columns`): ``cache`` and
``cache_column`` (the neural cache), ``long_caches`` (class and unigram caches over long
windows), ``char_rnn`` and ``crnn_column`` (the CRNN baseline), ``mixture_weights`` and
``best_column`` (NSLM-best: weights per history bucket, fitted on valid). The n-gram columns
are the n-gram package's (:mod:`nslm.ngram.columns`).
"""
