"""Config files and --set overrides; bad input is a one-line error with exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from nslm.cli import main
from nslm.config import load_config, valid_keys
from nslm.errors import NslmError

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.mark.parametrize("name", ["wt2-cpu", "paper-medium", "baseline-classic", "tiny"])
def test_shipped_configs_load(name: str) -> None:
    cfg = load_config(CONFIGS / f"{name}.toml")
    assert cfg.heads


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["hnlm_top='both'"], "'hnlm_top' must be one of separate, shared"),
        (["hnlm_top='shared'", "heads=['hnlm']"], "needs heads = \\['nnlm', 'hnlm'\\]"),
    ],
)
def test_shared_top_level_needs_both_heads(sets: list[str], message: str) -> None:
    with pytest.raises(NslmError, match=message):
        load_config(CONFIGS / "tiny.toml", sets)
    assert load_config(CONFIGS / "wt2-cpu.toml").hnlm_top == "shared"


def test_overrides_are_typed() -> None:
    cfg = load_config(
        CONFIGS / "tiny.toml",
        ["hidden_size=48", "lr=0.5", "heads=['nnlm']", "softmax=full", "bf16=true"],
    )
    assert (cfg.hidden_size, cfg.lr, cfg.heads, cfg.softmax, cfg.bf16) == (
        48,
        0.5,
        ["nnlm"],
        "full",
        True,
    )


def test_unknown_key_lists_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(NslmError) as err:
        load_config(None, ["hiden_size=3"])
    assert "hiden_size" in str(err.value)
    assert all(key in str(err.value) for key in valid_keys())
    bad = tmp_path / "bad.toml"
    bad.write_text("nonsense = 1\n")
    with pytest.raises(NslmError, match="valid keys"):
        load_config(bad)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"hidden_size = [", "malformed"),
        (b"\xff\xfe\x00binary", "malformed"),
        (b"hidden_size = 'big'", "wants a int"),
        (b"softmax = 'huge'", "must be one of"),
    ],
)
def test_bad_config_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(content)
    with pytest.raises(NslmError, match=message):
        load_config(path)


def test_cli_bad_config_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    code = main(
        [
            "train",
            "--config",
            str(CONFIGS / "tiny.toml"),
            "--set",
            "nope=1",
            "--run-dir",
            str(run_dir),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: unknown config key 'nope'")
    assert err.count("\n") == 1
    assert not run_dir.exists()  # nothing half-written
    assert main(["train", "--config", str(tmp_path / "missing.toml")]) == 2
    assert main(["eval", str(tmp_path)]) == 2


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["processes=0"], "'processes' must be at least 1"),
        (["processes=3"], "'batch_size' must be divisible by 'processes'"),
        (["sparse_embedding=true", "model='awd'"], "'sparse_embedding' needs model = 'lstm'"),
        (["sparse_embedding=true", "weight_decay=0.1"], "needs weight_decay = 0"),
        (["sparse_embedding=true", "optimizer='adamw'"], "needs optimizer 'adam'"),
        (["sparse_embedding=true", "optimizer='sgd'", "momentum=0.9"], "without momentum"),
    ],
)
def test_processes_and_sparse_embedding_are_checked(sets: list[str], message: str) -> None:
    with pytest.raises(NslmError, match=message):
        load_config(CONFIGS / "tiny.toml", sets)


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["lr_schedule='halve'"], "'lr_schedule' must be one of .*halving"),
        (["eval_every=-1"], "'eval_every' must be 0"),
        (["halving_epsilon=-0.1"], r"'halving_epsilon' must be in \[0, 1\)"),
        (["halving_epsilon=1"], r"'halving_epsilon' must be in \[0, 1\)"),
        (["max_halvings=0"], "'max_halvings' must be at least 1"),
    ],
)
def test_validation_and_rate_halving_keys_are_checked(sets: list[str], message: str) -> None:
    with pytest.raises(NslmError, match=message):
        load_config(CONFIGS / "tiny.toml", sets)
    cfg = load_config(None, ["lr_schedule='halving'", "eval_every=100"])
    assert (cfg.halving_epsilon, cfg.max_halvings, cfg.eval_every) == (0.003, 10, 100)


def test_the_default_trains_on_two_processes_with_tied_embeddings() -> None:
    # batch_size counts the streams of all processes; tied tables have dense gradients
    cfg = load_config(CONFIGS / "wt2-cpu.toml")
    assert cfg.processes == 2 and cfg.batch_size % cfg.processes == 0
    assert cfg.tie_weights and not cfg.sparse_embedding and cfg.emb_size == cfg.hidden_size


def test_a_key_that_is_not_the_configs_is_a_one_line_error() -> None:
    with pytest.raises(NslmError, match=r"unknown config key 'eval_tokens'; valid keys: .*test"):
        load_config(CONFIGS / "tiny.toml", ["eval_tokens=700"])


def test_class_choices_come_from_the_tagger() -> None:
    from nslm.config.checks import CHOICES
    from nslm.data.tagging import CLASS_CHOICES

    assert CHOICES["classes"] is CLASS_CHOICES
