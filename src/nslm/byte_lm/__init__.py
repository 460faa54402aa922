"""The byte-level LSTM LM, its neuron probes, ablation and steering.

Reading order: ``data`` (byte corpora: text as bytes 0–255) and ``labelled`` (sentiment
and part-of-speech labels for the probes) → ``intervention`` (ablate, clamp or steer units
inside a running LSTM) → ``generation`` (sampling, and each byte's neuron value) and
``colour`` (text coloured by one neuron) → ``steering`` (interventions as a user names
them) → ``probes/`` (which neurons carry sentiment or a tag, against controls).

Importing the package registers its corpora (``imdb-bytes``, ``bytes:DIR``) with the core
(:mod:`nslm.hooks`): ``nslm data prepare`` and training hand them to ``data``, and a config
on one must have no classes. ``nslm/__init__.py`` imports it.
"""

from nslm import hooks


def _is_byte_corpus(name) -> bool:
    from nslm.byte_lm.data import is_byte_corpus

    return is_byte_corpus(name)


def _prepare(name):
    from nslm.byte_lm.data import prepare_byte_corpus

    return prepare_byte_corpus(name)


def _locate(name):
    from nslm.byte_lm.data import locate_byte_corpus

    return locate_byte_corpus(name)


# bytes: nothing to tag, nothing to cache; the core's preparation hands them over
hooks.register_corpus_kind(
    hooks.CorpusKind(
        name="byte corpus",
        run_kind="byte",
        matches=_is_byte_corpus,
        prepare=_prepare,
        locate=_locate,
        has_classes=False,
    )
)
