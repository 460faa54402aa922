"""The keys of a training config and their defaults: :class:`TrainConfig`.

The rules they follow are :mod:`nslm.config.checks`; reading them from TOML, ``--set`` and a
run's config.json is :mod:`nslm.config.train`. This module imports neither, so both can
import the class.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TrainConfig:
    """Every knob of ``nslm train``; the defaults are the fast CPU configuration."""

    # data
    corpus: str = "wikitext-2"
    classes: str = "all"
    # user-defined classes, "NAME=REGEX" each (paper Table 1, step 2; docs/user-classes.md)
    class_rules: list[str] = field(default_factory=list)
    train_tokens: int = 0  # 0 = the whole split; >0 = a prefix (tiny test configs)
    # 0 = the whole split; >0 = a prefix: of valid, scored at every validation during
    # training and at its end; of test, scored once at the end of training
    valid_tokens: int = 0
    test_tokens: int = 0
    # model
    model: str = "lstm"  # lstm | awd | transformer | fixed-window
    emb_size: int = 256
    hidden_size: int = 512
    num_layers: int = 2
    dropout: float = 0.3
    # the input embeddings are the NNLM softmax's weights: awd (full softmax), or lstm (full,
    # or adaptive input tied to the adaptive softmax; models/adaptive_input.py)
    tie_weights: bool = False
    weight_drop: float = 0.0  # awd: DropConnect on the hidden-to-hidden weights
    embed_dropout: float = 0.0  # awd: drop whole word types from the embedding
    locked_dropout: bool = False  # one dropout mask per sequence, not per step (lstm, awd)
    n_heads: int = 4  # transformer
    ff_size: int = 1024  # transformer
    context: int = 4  # fixed-window: words of history (n − 1)
    # paper Table 6: append fixed value / lat-lon dimensions to the input embeddings (lstm, awd)
    grounded: bool = False
    # paper Table 5: initialise the input embeddings from a GloVe/word2vec text file ("" = no)
    init_vectors: str = ""
    # word+POS LMs (model = "word-pos", corpus = "brown" | "ewt" | "tagged:DIR"; docs/word-pos.md)
    pos_model: str = "joint"  # word_only | joint | eq11 | multitask | tagger
    eq11_loss: str = "eq11"  # eq11 (the joint's cross-entropy) | eq5 (paper 003 Eq. 5)
    vocab_size: int = 10_000  # the vocab_size − 1 most frequent train words + unknowns
    tag_emb_size: int = 16
    shape_emb_size: int = 16  # the suffix and the shape class of each word
    tag_weight: float = 1.0  # multitask: the weight of the auxiliary tag loss
    # heads
    heads: list[str] = field(default_factory=lambda: ["nnlm", "hnlm"])
    softmax: str = "adaptive"  # full | adaptive
    cutoffs: list[int] = field(default_factory=lambda: [2000, 10000])
    div_value: float = 4.0
    hnlm_weight: float = 1.0  # weight of the HNLM loss in the multi-task sum
    # separate: the HNLM's top level has its own softmax layer; shared: it reuses the NNLM's
    # word logits and adds one row per class tag (models/shared_top.py; cheaper to evaluate)
    hnlm_top: str = "separate"
    # heads = ["numeral"]: one of Spithourakis & Riedel's numeral models (docs/numerals.md)
    numeral_model: str = "h-softmax+rnn"
    numeral_min_count: int = 2  # rarer training numerals are <unk_num>
    digit_size: int = 64  # the digit LSTMs' width (numeral encoders, the d-RNN)
    # optimisation
    optimizer: str = "adam"  # sgd | adam | adamw
    lr: float = 2e-3
    momentum: float = 0.0
    weight_decay: float = 0.0
    # plateau | cosine | constant | linear (to 0 over the step or time budget, as the byte
    # LM of docs/byte-lm.md) | halving (Gill 2017, Figure 2: halve the lr at a validation
    # that gains less than halving_epsilon of the last one; stop after max_halvings)
    lr_schedule: str = "plateau"
    lr_decay: float = 4.0  # plateau: divide the lr by this when validation stalls
    # halving: Gill gives no value; 0.003 is that of the scheme Gill follows, Mikolov's
    # (rnnlm's min-improvement 1.003; Kaldi's newbob start_halving_impr). Mikolov's is a
    # ratio of log-likelihoods (~0.015 nats per token at perplexity 150); on a perplexity a
    # gain under 0.3% is under 0.003 nats, so this halves later, never sooner.
    halving_epsilon: float = 0.003
    max_halvings: int = 10  # halving: stop training after this many (Gill: 10)
    warmup_steps: int = 0
    clip: float = 0.25
    batch_size: int = 64  # streams in all; each of N processes takes batch_size / N
    bptt: int = 35
    epochs: int = 40
    max_steps: int = 0  # 0 = no limit; a limit on optimizer steps (tests)
    max_minutes: float = 0.0  # 0 = no limit; stop training after this much wall time
    patience: int = 3  # epochs without validation gain before early stopping
    # what validation's primary figure (early stopping, the kept best weights) is read from:
    # "all" tokens, or only the "numbers" (the first head's perplexity at the number-class
    # positions: paper Table 4's Numbers perplexity, less the spelling of unknown numerals,
    # a constant of the run that does not change which weights are best)
    early_stopping_on: str = "all"
    eval_every: int = 0  # also validate every N steps inside an epoch (0 = at epoch ends)
    eval_batch_size: int = 16
    # speed and reproducibility
    seed: int = 1
    threads: int = 0  # per process; 0 = torch's default (1 under a DDP launch)
    # >1: ``nslm train`` starts itself under torchrun with this many DDP processes (one
    # machine); under a torchrun the user started, torchrun's own count wins
    processes: int = 1
    # the input embedding's gradient as sparse rows (lazy Adam on it): what makes a second
    # process pay on CPU, since gloo then all-reduces a batch's rows, not the whole table
    sparse_embedding: bool = False
    bf16: bool = False  # bfloat16 autocast on CPU
    compile: bool = False  # torch.compile the backbone
    checkpoint_every: int = 500  # steps between resumable checkpoints (0 = epoch ends only)
    # also checkpoint when training time passes each of these minutes, and keep those
    # checkpoints in RUN/kept/ (the latest one alone is kept otherwise): probes of how a
    # feature emerges during training read them (docs/byte-lm.md)
    keep_checkpoints_at_minutes: list[float] = field(default_factory=list)
    # keep the weights (not a resumable checkpoint) every this many steps, in
    # RUN/kept/step-NNNNNNN.safetensors: a learning curve is scored from them afterwards
    keep_weights_every: int = 0
    device: str = "cpu"  # where the model trains and scores: cpu, cuda, cuda:1, …
    # logging
    progress: bool = True
    tensorboard: bool = False
    log_every: int = 50

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
