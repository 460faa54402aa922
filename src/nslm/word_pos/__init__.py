"""The word+POS joint LM: a word and its part-of-speech tag predicted together.

Reading order: ``rules`` (its config keys) → ``tagged`` (Brown and UD EWT as tagged
sentences; ``brown_tags`` maps Brown's tags to the universal ones) → ``vocab`` (words,
shapes, tags) → ``batches`` (sentences padded into batches) → ``model`` → ``scores`` →
``run`` (opening a trained run) → ``training`` (its task in the trainer) → ``evaluation``
and ``generation``.

Importing the package registers its training task and config rules with the core
(:mod:`nslm.hooks`); ``nslm/__init__.py`` imports it.
"""

from nslm import hooks
from nslm.word_pos.rules import MODEL, check_word_pos_config


def _task() -> type:
    from nslm.word_pos.training import WordPosTask

    return WordPosTask


# the trainer's task for model = 'word-pos', and the rules of the config keys it reads
hooks.register_training_task(MODEL, _task)
hooks.register_config_rule(check_word_pos_config)
