"""Sparse embedding gradients: clipping, the split Adam and its checkpointed state."""

from __future__ import annotations

from pathlib import Path

import hypothesis.strategies as st
import torch
from hypothesis import given, settings
from safetensors.torch import load_file
from torch import nn

from nslm.config import load_config
from nslm.models.lm import LanguageModel
from nslm.training import checkpoint as ck
from nslm.training.optim import SplitAdam, build_optimizer, clip_grad_norm

VOCAB, DIM = 30, 6


class Tiny(nn.Module):
    """An embedding and a linear map: the smallest model with a sparse-gradient table."""

    def __init__(self, sparse: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(VOCAB, DIM, sparse=sparse)
        self.out = nn.Linear(DIM, 3)

    def loss(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(ids)).pow(2).sum()


@settings(max_examples=40, deadline=None)
@given(
    ids=st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=40),
    max_norm=st.floats(1e-3, 1e3),
)
def test_clipping_a_sparse_gradient_matches_clipping_its_dense_form(
    ids: list[int], max_norm: float
) -> None:
    """Repeated ids leave duplicate rows in the sparse gradient until it is coalesced; the
    norm and the clipped gradient must be those of the summed (dense) gradient."""
    batch = torch.tensor(ids)
    sparse, dense = Tiny(sparse=True), Tiny(sparse=False)
    sparse.loss(batch).backward()
    dense.loss(batch).backward()
    got = clip_grad_norm(list(sparse.parameters()), max_norm)
    want = torch.nn.utils.clip_grad_norm_(list(dense.parameters()), max_norm)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(sparse.embed.weight.grad.to_dense(), dense.embed.weight.grad)
    torch.testing.assert_close(sparse.out.weight.grad, dense.out.weight.grad)


def test_split_adam_updates_only_the_rows_a_batch_used() -> None:
    model = Tiny(sparse=True)
    opt = SplitAdam([model.embed.weight], list(model.out.parameters()), lr=0.1)
    before = model.embed.weight.detach().clone()
    model.loss(torch.tensor([3, 3, 7])).backward()
    opt.step()
    moved = (model.embed.weight.detach() != before).any(dim=1)
    assert moved.nonzero().flatten().tolist() == [3, 7]
    assert len(opt.param_groups) == 2  # the lr schedule reaches both optimizers


def test_split_adam_state_survives_a_checkpoint_exactly(tmp_path: Path) -> None:
    """Saved through the checkpoint's safetensors/JSON split and loaded into a fresh
    optimizer, the next steps are bit-identical to those of the optimizer never saved."""
    batches = [torch.tensor([1, 2, 2, 5]), torch.tensor([5, 9]), torch.tensor([0, 1, 29])]

    def make() -> tuple[Tiny, SplitAdam]:
        m = Tiny(sparse=True)
        return m, SplitAdam([m.embed.weight], list(m.out.parameters()), lr=0.05)

    def step(m: Tiny, opt: SplitAdam, ids: torch.Tensor) -> None:
        opt.zero_grad()
        m.loss(ids).backward()
        opt.step()

    kept, kept_opt = make()
    for ids in batches[:2]:
        step(kept, kept_opt, ids)
    tensors, meta = ck.optimizer_to_files(kept_opt)
    ck.save_tensors_atomic(tmp_path / "optim.safetensors", tensors)
    ck.write_json_atomic(tmp_path / "optim.json", meta)
    restored, restored_opt = make()
    restored.load_state_dict(kept.state_dict())
    saved = ck.optimizer_from_files(
        load_file(str(tmp_path / "optim.safetensors")), ck.read_json(tmp_path / "optim.json")
    )
    restored_opt.load_state_dict(saved)
    for ids in batches[1:]:
        step(kept, kept_opt, ids)
        step(restored, restored_opt, ids)
    for (name, a), b in zip(kept.state_dict().items(), restored.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_the_lstm_model_gets_split_adam_only_with_sparse_embedding() -> None:
    tiny = Path(__file__).resolve().parents[2] / "configs" / "tiny.toml"
    for sparse, kind in ((True, SplitAdam), (False, torch.optim.Adam)):
        cfg = load_config(tiny, [f"sparse_embedding={str(sparse).lower()}", "heads=['nnlm']"])
        model = LanguageModel(cfg, 100, None)
        opt = build_optimizer(cfg, model)
        assert type(opt) is kind
        n_params = sum(len(g["params"]) for g in opt.param_groups)
        assert n_params == len(list(model.parameters()))
