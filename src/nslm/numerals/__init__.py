"""The numeral models of Spithourakis & Riedel (2018), paper Table 4's rivals of the NSLM.

Reading order: ``rules`` (the config keys of the numeral models) → ``vocab`` (the numeral
vocabulary: each numeral's digits, precision and value) → ``branches`` (the digit encoder,
the d-RNN decoder, the mixture of Gaussians) → ``model`` (the numeral head on the LM:
softmax, h-softmax, d-RNN, MoG, combination) → ``scoring`` (numeral perplexity, proper and
adjusted, and each model's predicted value) → ``values`` (the NSLM's predicted values over
the same candidates) and ``value_metrics`` (MAPE, MdAPE, MdAE and the candidate set).

Importing the package registers the numeral head and its config rules with the core
(:mod:`nslm.hooks`); ``nslm/__init__.py`` imports it.
"""

from nslm import hooks
from nslm.numerals.rules import check_numeral_config


def _spec_from_corpus(cfg, corpus):
    # built alike on every DDP rank (the Gaussians' EM is seeded)
    from nslm.numerals.vocab import NumeralSpec

    return NumeralSpec.from_corpus(corpus, cfg.numeral_min_count)


def _spec_from_json(data: dict):
    from nslm.numerals.vocab import NumeralSpec

    return NumeralSpec.from_json(data)


def _attach(cfg, backbone, spec):
    from nslm.numerals.model import attach_numeral_model

    return attach_numeral_model(cfg, backbone, spec)


# the numeral head on the core's LM (models/lm.py) and the rules of its config keys
hooks.register_head_kind(
    hooks.HeadKind(
        name="numeral",
        docs="docs/numerals.md",
        spec_file="numerals.json",
        spec_from_corpus=_spec_from_corpus,
        spec_from_json=_spec_from_json,
        attach=_attach,
    )
)
hooks.register_config_rule(check_numeral_config)
