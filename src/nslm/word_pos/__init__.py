"""The word+POS joint LM: a word and its part-of-speech tag predicted together.

Reading order: ``tagged`` (Brown and UD EWT as tagged sentences; ``brown_tags`` maps
Brown's tags to the universal ones) → ``vocab`` (words, shapes, tags) → ``batches``
(sentences padded into batches) → ``model`` → ``scores`` → ``run`` (opening a trained run)
→ ``training`` (its task in the trainer) → ``evaluation`` and ``generation``.
"""
