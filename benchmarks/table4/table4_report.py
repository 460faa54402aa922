"""What benchmarks/table4/table4.py shows: the printed tables, the learning-curve plot and the
per-position predictions (JSON lines)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from nslm.data.numbers import number_value
from table4_parts import NSLM_ROWS, NUMERAL_ROWS, Texts

ORDER = (*NUMERAL_ROWS, *NSLM_ROWS)


def _num(x, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "—"
    return f"{x:,.{digits}f}"


def _change(x, tie: bool | None) -> str:
    """A % change, "tie" when the tie rule calls it one (table4_parts.TIE_RULE)."""
    if x is None:
        return "—"
    return f"{x:+.1%}" + (" tie" if tie else "")


def render(entry: dict, baselines: dict) -> str:
    """One budget's two tables: Numbers perplexity, then value prediction."""
    table = entry["table4"]
    rows = [r for r in ORDER if r in table]
    head = (
        f"Table 4, budget {entry['name']}: {entry['steps']:,} steps, "
        f"{entry['train_tokens'] / 1e6:.2f} M tokens; test Numbers, proper unless named; "
        "a tie: |Δ| < 2·√(σa² + σb²), σ over the seeds (borrowed for one seed)"
    )
    lines = [
        head,
        f"{'model':<15} {'proper':>9} {'seeds: mean ± σ':>22} {'vs softmax':>13} "
        f"{'+NNLM proper':>13} {'λ':>5} {'adjusted':>9} {'in-vocab':>9}",
    ]
    for name in rows:
        r = table[name]
        seeds = "—"
        if "num_ppl_proper_mean" in r:
            n = len(r["seeds"])
            seeds = f"{r['num_ppl_proper_mean']:,.1f} ± {r['num_ppl_proper_std']:,.1f} ({n})"
        mixed = r.get("with_nnlm")
        mixed_ppl, lam = "—", r.get("lambda")
        if isinstance(mixed, dict):
            mixed_ppl, lam = _num(mixed["num_ppl_proper"]), mixed["lambda"]
        flag = " !tokens" if "tokens_warning" in r else ""
        lines.append(
            f"{name:<15} {_num(r['num_ppl_proper']):>9} {seeds:>22} "
            f"{_change(r['change_vs_softmax'], r.get('tie_vs_softmax')):>13} {mixed_ppl:>13} "
            f"{'' if lam is None else f'{lam:.2f}':>5} {_num(r['num_ppl_adjusted']):>9} "
            f"{_num(r['num_ppl_in_vocab']):>9}{flag}"
        )
    for name, why in entry.get("missing_rows", {}).items():
        lines.append(
            f"{name} missing for {', '.join(why)}: {'; '.join(dict.fromkeys(why.values()))}"
        )
    if not entry["train_tokens_check"]["ok"]:
        lines.append(f"WARNING: train_tokens differ by more than 1%: {entry['train_tokens_check']}")
    lines.append("")
    lines.append(
        f"{'model':<15} {'MdAPE':>7} {'MdAE':>9} {'MAPE':>10}   (mode over the candidates)"
    )
    for name in rows:
        r = table[name]
        lines.append(
            f"{name:<15} {_num(r['mdape']):>7} {_num(r['mdae'], 0):>9} {_num(r['mape'], 0):>10}"
        )
    for which in ("train_median", "train_mean"):
        b = baselines[which]
        label = which.replace("_", " ")
        lines.append(
            f"{label:<15} {_num(b['mdape']):>7} {_num(b['mdae'], 0):>9} {_num(b['mape'], 0):>10}"
        )
    out = entry.get("outcome") or {}
    if "best_numeral_model" in out:
        verdict = {True: "outside the band", False: "inside the band: a tie", None: "no band"}
        lines.append(
            f"NSLM-open {out['nslm_open_num_ppl_proper']:,.1f} ({out['nslm_open_seeds']} "
            f"seed(s)) against the best numeral model, {out['best_numeral_model']} "
            f"{out['best_numeral_num_ppl_proper']:,.1f} ({out['best_numeral_seeds']} seed(s)): "
            f"{out['nslm_open_vs_best']:+.1%} ({verdict[out['outside_noise_band']]})"
        )
        if out["tied_with_best"]:
            lines.append(
                f"tied with {out['best_numeral_model']}: {', '.join(out['tied_with_best'])}"
            )
    elif out:
        lines.append(f"no outcome: NSLM-open missing ({out.get('nslm_open_missing')})")
    if out.get("single_seed_rows"):
        lines.append(f"one seed (σ borrowed): {', '.join(out['single_seed_rows'])}")
    return "\n".join(lines)


# how each row of the learning curves is drawn: the numeral models and NSLM-pure (nothing
# tuned on valid) are the comparison; the λ-mixtures are extra, labelled as tuned on valid
CURVE_LABELS = {
    "NSLM-pure": "NSLM-pure (no λ: compare with the numeral models)",
    "NNLM": "NNLM",
    "NSLM": "NSLM (λ tuned on valid at each step)",
    "NSLM-open": "NSLM-open (λ tuned on valid)",
}


def plot_curves(path: Path, curves: dict) -> None:
    """Valid Numbers perplexity (proper) by training tokens, one panel per budget: the
    numeral models alone beside NSLM-pure, the like-for-like comparison (neither tuned on
    valid); the NNLM and the λ-mixtures thin and labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = [b for b in ("small", "large") if curves.get(b)]
    fig, axes = plt.subplots(1, len(budgets), figsize=(6.5 * len(budgets), 4.8), squeeze=False)
    colours = plt.get_cmap("tab10").colors
    for ax, budget in zip(axes[0], budgets, strict=True):
        for k, name in enumerate(ORDER):
            c = curves[budget].get(name)
            if not c:
                continue
            x = np.array(c["train_tokens"]) / 1e6
            y = c["valid_num_ppl_proper"]
            if name in NUMERAL_ROWS:
                ax.plot(x, y, "-", marker=".", color=colours[k % 10], label=name)
            elif name == "NSLM-pure":
                ax.plot(x, y, "--", marker="o", lw=2.2, color="black", label=CURVE_LABELS[name])
            else:
                style, marker = {"NNLM": ("-.", "x"), "NSLM-open": (":", "s")}.get(name, (":", "^"))
                ax.plot(x, y, style, marker=marker, lw=1, color="grey", label=CURVE_LABELS[name])
        ax.set_yscale("log")
        ax.set_xlabel("training tokens (M)")
        ax.set_ylabel("valid Numbers perplexity (proper)")
        ax.set_title(f"Table 4 learning curves, budget {budget}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_predictions(
    path: Path, texts: Texts, gold: list[str], candidates: list[str], modes: dict
) -> None:
    """One JSON line per budget and test numeral: its position in test, the gold string and
    value, and each row's mode (a candidate string)."""
    positions = texts.positions["test"].tolist()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for budget, by_row in modes.items():
            rows = [r for r in ORDER if r in by_row]
            for i, (position, string) in enumerate(zip(positions, gold, strict=True)):
                line = {
                    "budget": budget,
                    "position": position,
                    "gold": string,
                    "value": number_value(string),
                    "modes": {r: candidates[int(by_row[r][i])] for r in rows},
                }
                handle.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
    tmp.replace(path)
