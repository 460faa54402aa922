"""One backbone, several heads: the multi-task language model that ``nslm train`` fits."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from nslm.config import TrainConfig
from nslm.hooks import head_kinds
from nslm.models.heads import HNLMHead, NNLMHead
from nslm.models.hnlm_layout import HNLMLayout

PARTS = ("nnlm", "hnlm", "top", "class_mass")


def build_backbone(cfg: TrainConfig, vocab_size: int) -> nn.Module:
    if cfg.model == "lstm":
        from nslm.models.lstm import LSTMBackbone

        return LSTMBackbone(
            vocab_size,
            cfg.emb_size,
            cfg.hidden_size,
            cfg.num_layers,
            cfg.dropout,
            locked=cfg.locked_dropout,
            grounded=cfg.grounded,
            sparse_embedding=cfg.sparse_embedding,
        )
    if cfg.model == "awd":
        from nslm.models.awd import AWDBackbone

        return AWDBackbone(vocab_size, cfg)
    if cfg.model == "fixed-window":
        from nslm.models.fixed_window import FixedWindowBackbone

        return FixedWindowBackbone(
            vocab_size, cfg.emb_size, cfg.hidden_size, cfg.context, cfg.dropout
        )
    from nslm.models.transformer import TransformerBackbone

    return TransformerBackbone(vocab_size, cfg)


class LanguageModel(nn.Module):
    """A backbone with an NNLM head (Eq. 2) and/or an HNLM head (Eq. 3), trained together,
    or with a head another system registered (:class:`nslm.hooks.HeadKind`: the numeral
    models' ``numeral`` head), built from its ``head_spec``.

    ``forward`` computes the multi-task training loss so that DistributedDataParallel sees
    every parameter used in one call: loss = mean NLL(NNLM) + hnlm_weight · mean NLL(HNLM).
    """

    def __init__(
        self,
        cfg: TrainConfig,
        vocab_size: int,
        layout: HNLMLayout | None,
        head_spec: Any = None,
    ) -> None:
        super().__init__()
        self.head_names = list(cfg.heads)
        self.backbone = build_backbone(cfg, vocab_size)
        dim = self.backbone.out_dim
        heads: dict[str, nn.Module] = {}
        kind, cutoffs, div = cfg.softmax, cfg.cutoffs, cfg.div_value
        if "nnlm" in self.head_names:
            heads["nnlm"] = NNLMHead(dim, vocab_size, kind, cutoffs, div)
        if "hnlm" in self.head_names:
            if layout is None:
                raise ValueError("the HNLM head needs an HNLMLayout")
            words = heads["nnlm"].softmax if cfg.hnlm_top == "shared" else None
            heads["hnlm"] = HNLMHead(dim, layout, kind, cutoffs, div, words=words)
        for name, kind in head_kinds().items():
            if name in self.head_names:
                if head_spec is None:
                    raise ValueError(f"the {name} head needs its spec ({kind.spec_file})")
                heads[name] = kind.attach(cfg, self.backbone, head_spec)
        self.heads = nn.ModuleDict({name: heads[name] for name in self.head_names})
        self.weights = {n: cfg.hnlm_weight if n == "hnlm" else 1.0 for n in self.head_names}
        tie = getattr(self.backbone, "tie_target", None)
        if cfg.tie_weights and "nnlm" in heads and tie is not None:  # awd
            softmax = heads["nnlm"].softmax
            if softmax.kind != "full":
                raise ValueError("tie_weights needs softmax = 'full'")
            softmax.linear.weight = tie.weight
        elif cfg.tie_weights and cfg.model in ("lstm", "awd") and "nnlm" in heads:
            from nslm.models.adaptive_input import tie_input_to_output

            tie_input_to_output(self.backbone, heads["nnlm"].softmax)

    def features(self, x: Tensor, state: Any = None) -> tuple[Tensor, Any]:
        """Backbone features (T, B, D) for inputs x (T, B), and the state to carry on."""
        return self.backbone(x, state)

    def target_log_probs(
        self, h: Tensor, targets: Tensor, classes: Tensor, parts: tuple[str, ...]
    ) -> dict[str, Tensor]:
        """Per-row log-probabilities of the asked ``parts`` for features h (N, D).

        ``nnlm``: Eq. 2; ``hnlm``: Eq. 3; ``top``: the HNLM's top level alone, log P(c_t | h)
        at class positions and log P_top(w_t | h) at word positions (Eq. 4's neural factor).
        ``class_mass``: log Σ_c P(c | h), the top level's mass on all tags together (a shared
        top level only). With a shared top level the NNLM and the top level come from one
        pass over the logits.
        """
        out: dict[str, Tensor] = {}
        hnlm = self.heads["hnlm"] if "hnlm" in self.heads else None  # noqa: SIM401 (ModuleDict)
        need_top = "top" in parts or "hnlm" in parts or "class_mass" in parts
        if hnlm is not None and hnlm.shared and need_top:
            out["nnlm"], top, out["class_mass"] = hnlm.top.joint(h, targets, classes)
        else:
            if "nnlm" in parts:
                out["nnlm"] = self.heads["nnlm"].target_log_prob(h, targets, classes)
            top = hnlm.top_log_prob(h, targets, classes) if need_top else None
        if "class_mass" in parts and "class_mass" not in out:
            raise ValueError("class_mass needs an HNLM head with a shared top level")
        if "hnlm" in parts:
            out["hnlm"] = top + hnlm.within_log_prob(h, targets, classes)
        if "top" in parts:
            out["top"] = top
        for part in parts:
            if part not in out and part not in PARTS:  # another system's head
                out[part] = self.heads[part].target_log_prob(h, targets, classes)
        return {p: out[p] for p in parts}

    def forward(
        self, x: Tensor, y: Tensor, classes: Tensor, mask: Tensor, state: Any = None
    ) -> tuple[Tensor, Tensor, Any]:
        """Training step: (loss, per-head [sum NLL, count] as a (H, 2) tensor, new state)."""
        h, state = self.features(x, state)
        flat = mask.reshape(-1)
        hv = h.reshape(-1, h.shape[-1])[flat]
        yv = y.reshape(-1)[flat]
        cv = classes.reshape(-1)[flat]
        loss = h.new_zeros((), dtype=torch.float32)
        stats = []
        count = max(int(flat.sum()), 1)
        log_probs = self.target_log_probs(hv, yv, cv, tuple(self.head_names))
        for name in self.head_names:
            total = -log_probs[name].sum()
            loss = loss + self.weights[name] * total / count
            stats.append(torch.stack([total.detach(), torch.tensor(float(len(yv)))]))
        return loss, torch.stack(stats), state
