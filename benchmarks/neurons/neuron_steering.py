"""The steering part of benchmarks/neurons/neuron_interventions.py: does adding a direction to the
running LSTM, or clamping units, move what it writes?

1. **Positive control**: d = the mean output-layer row of the digit bytes minus the mean
   row (``--steer output:0123456789``), added β·d to the hidden state at every step, must
   raise the fraction of digit bytes in the samples; a random direction of the same norm
   must not. A tool that passes this can move the model; one that fails it is broken.
2. **Sentiment**: the IMDB probe's direction (w / σ on ``mean_cell_hidden``: its cell half
   added to the cell, its hidden half to the hidden state), −, none, + and a random
   direction of the same norms ±, after a neutral prime; each sample (up to its first
   newline, where its review ends) classified by the TF-IDF + logistic-regression IMDB
   classifier of the probes' bag-of-words baseline; the fraction positive with its Wilson
   95% interval (Wilson 1927), and the bits per byte of the samples under the intact model
   (how far the steer pushed the text off the model's own distribution).
3. **Attempts**: larger scales, the candidate's pre-activation instead of the state, the
   top units clamped (Radford et al. 2017 fix the sentiment unit), the digit direction in
   the cell instead of the hidden state; each recorded with its figures.
"""

from __future__ import annotations

import numpy as np
import torch

from nslm.byte_lm.colour import neuron_values
from nslm.byte_lm.intervention import Intervention, intervening
from nslm.byte_lm.labelled import read_imdb
from nslm.byte_lm.probes import control_plots as plots
from nslm.byte_lm.probes.sentiment import bow_classifier
from nslm.byte_lm.probes.states import byte_cell_states
from nslm.byte_lm.steering import build_intervention, direction, sample_bytes
from nslm.errors import NslmError
from nslm.generation.sampling import Sampler, SamplingConfig

DIGITS = b"0123456789"
PRIME = b"\nI watched this movie last night"  # neutral: no opinion yet (after a review's end)
Z95 = 1.959964


def arguments(parser) -> None:
    parser.add_argument("--samples", type=int, default=400, help="per sentiment condition")
    parser.add_argument("--control-samples", type=int, default=200)
    parser.add_argument("--attempt-samples", type=int, default=200)
    parser.add_argument("--sample-bytes", type=int, default=300)
    parser.add_argument("--bow-train", type=int, default=10_000)


def wilson(k: int, n: int) -> list[float]:
    """The Wilson score 95% interval of a binomial proportion k / n (Wilson 1927)."""
    p = k / n
    centre = (p + Z95**2 / (2 * n)) / (1 + Z95**2 / n)
    half = Z95 * np.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / (1 + Z95**2 / n)
    return [float(centre - half), float(centre + half)]


@torch.no_grad()
def intact_bpb(loaded, prime: bytes, samples: list[bytes]) -> float:
    """Bits per byte of the samples (after the prime) under the model without intervention."""
    x = torch.tensor([list(prime + s) for s in samples], dtype=torch.long).T  # (T, n)
    h, _ = loaded.model.features(x[:-1], None)
    log_probs = loaded.model.heads["nnlm"].log_dist(h[len(prime) - 1 :].reshape(-1, h.shape[-1]))
    targets = x[len(prime) :].reshape(-1)
    nats = -log_probs.gather(1, targets[:, None]).mean()
    return float(nats / np.log(2))


def draw(ctx, iv, n: int, seed: int) -> list[bytes]:
    sampler = Sampler(SamplingConfig(temperature=1.0), seed=seed)
    return sample_bytes(ctx.loaded, ctx.prime, n, ctx.args.sample_bytes, sampler, iv)


def steer(ctx, parts: dict[str, np.ndarray], alpha: float) -> Intervention:
    return Intervention(steer={p: torch.from_numpy(d) for p, d in parts.items()}, alpha=alpha)


def random_like(parts: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """A random Gaussian direction per place with the norm of the given one."""
    rng = np.random.default_rng(seed)
    out = {}
    for place, d in parts.items():
        r = rng.standard_normal(len(d))
        out[place] = (r * np.linalg.norm(d) / np.linalg.norm(r)).astype(np.float32)
    return out


def digit_fraction(samples: list[bytes]) -> float:
    return float(np.mean([b in DIGITS for s in samples for b in s]))


def digit_probe_direction(ctx) -> tuple[np.ndarray, float]:
    """The cell-state direction of a probe for "this byte is a digit" (L1 logistic
    regression on the cell state after each of the first 50 kB of valid text, w / σ),
    scaled to the output direction's norm; and the probe's balanced accuracy there."""
    from nslm.byte_lm.probes.estimators import L1Probe
    from nslm.models.lstm import lstm_state_chunks

    ids = np.asarray(ctx.loaded.corpus.splits["valid"].token_ids[:50_000], dtype=np.int64)
    x = torch.from_numpy(ids[: len(ids) // 50 * 50].reshape(50, -1).T.copy())
    cells = np.concatenate(
        [c.numpy() for _, _, c in lstm_state_chunks(ctx.loaded.model.backbone, x)]
    )
    X, y = cells.reshape(-1, cells.shape[-1]), np.isin(x.numpy().reshape(-1), list(DIGITS))
    probe = L1Probe(C=0.1).fit(X, y)
    pred = probe.predict(X).astype(bool)
    balanced = float((np.mean(pred[y]) + np.mean(~pred[~y])) / 2)
    d = probe.weights() / probe.scale_
    norm = np.linalg.norm(direction(ctx.loaded, "output:" + DIGITS.decode()))
    return (d * norm / np.linalg.norm(d)).astype(np.float32), balanced


def positive_control(ctx, beta: float, place: str = "hidden", probe: bool = False) -> dict:
    if probe:
        found, balanced = digit_probe_direction(ctx)
        d = {place: found}
    else:
        d = {place: direction(ctx.loaded, "output:" + DIGITS.decode())}
    n = ctx.args.control_samples
    ctx.prime = b"\n"
    if not hasattr(ctx, "digits_none"):  # the same unsteered draw for every setting
        ctx.digits_none = digit_fraction(draw(ctx, None, n, 1))
    none = ctx.digits_none
    plus = digit_fraction(draw(ctx, steer(ctx, d, beta), n, 1))
    rand = digit_fraction(draw(ctx, steer(ctx, random_like(d, 7), beta), n, 1))
    name = "output:0123456789 (mean digit row − mean row)"
    if probe:
        name = f"digit probe on the cell state, w/σ (balanced accuracy {balanced:.3f})"
    return {
        "direction": name,
        "place": place,
        "norm": float(np.linalg.norm(d[place])),
        "beta": beta,
        "samples": n,
        "sample_bytes": ctx.args.sample_bytes,
        "target_fraction_none": none,
        "target_fraction_plus": plus,
        "target_fraction_random": rand,
        "passes": plus >= 5 * none and 0.5 * none <= rand <= 2 * none,
    }


class Judge:
    """The TF-IDF IMDB classifier: the fraction of samples it calls positive."""

    def __init__(self, n_train: int) -> None:
        train = read_imdb("train")
        texts, labels = train.texts, train.labels
        splits = {
            "train": type(train)(texts[:n_train], labels[:n_train]),
            "dev": type(train)(texts[n_train : n_train + 500], labels[n_train : n_train + 500]),
        }
        (self.vectorizer, self.model), self.C, self.dev_acc, _ = bow_classifier(splits)

    def positive(self, samples: list[bytes]) -> np.ndarray:
        reviews = [s.split(b"\n")[0].decode("utf-8", "replace") for s in samples]
        return self.model.predict(self.vectorizer.transform(reviews)) == 1


def condition(ctx, iv, n: int, seed: int) -> dict:
    samples = draw(ctx, iv, n, seed)
    positive = ctx.judge.positive(samples)
    return {
        "positive_fraction": float(positive.mean()),
        "interval95": wilson(int(positive.sum()), n),
        "bpb": intact_bpb(ctx.loaded, ctx.prime, samples),
        "samples": n,
        "example": samples[0].split(b"\n")[0].decode("utf-8", "replace")[:200],
    }


def sentiment_direction(ctx) -> dict[str, np.ndarray]:
    w = ctx.imdb.probe.weights() / ctx.imdb.probe.scale_  # the logit's gradient in raw units
    H = ctx.hidden
    return {"cell": w[:H].astype(np.float32), "hidden": w[H:].astype(np.float32)}


def pair(ctx, make, n: int, label: str) -> dict:
    """A steer both ways (sign −, +), each ``n`` samples."""
    out = {"setting": label}
    for name, sign in (("minus", -1.0), ("plus", 1.0)):
        out[name] = condition(ctx, make(sign), n, seed=2)
    return out


def top_units(ctx, k: int) -> list[tuple[int, float]]:
    """The IMDB probe's top k units (cell + hidden |weight|) and the sign of their weight."""
    w = ctx.imdb.probe.coef_[0]
    H = ctx.hidden
    score = np.abs(w[:H]) + np.abs(w[H:])
    return [(int(u), float(np.sign(w[u] + w[H + u]))) for u in np.argsort(-score)[:k]]


def measure(ctx) -> dict:
    args = ctx.args
    out = {"positive_control": positive_control(ctx, 1.0), "attempts": []}
    for beta in (0.3, 3.0):
        out["attempts"].append({"positive_control": positive_control(ctx, beta)})
    out["attempts"].append({"positive_control": positive_control(ctx, 1.0, "cell")})
    for place in ("cell", "hidden"):  # the calibration's digit probe moved nothing
        try:
            out["attempts"].append({"positive_control": positive_control(ctx, 1.0, place, True)})
        except NslmError as err:  # valid text without digits: no digit probe
            out["attempts"].append({"digit_probe": f"not fitted: {err}"})
    ctx.judge, ctx.prime = Judge(args.bow_train), PRIME
    d = sentiment_direction(ctx)
    # α: the hidden half's added norm equals the digit direction's at β = 1, which moved
    # the digits (the positive control); the cell half is scaled alike
    alpha = out["positive_control"]["norm"] / float(np.linalg.norm(d["hidden"]))
    rand = random_like(d, 11)
    n = args.samples
    sentiment = {"none": condition(ctx, None, n, seed=2)}
    sentiment["minus"] = condition(ctx, steer(ctx, d, -alpha), n, seed=2)
    sentiment["plus"] = condition(ctx, steer(ctx, d, alpha), n, seed=2)
    sentiment["random_minus"] = condition(ctx, steer(ctx, rand, -alpha), n, seed=2)
    sentiment["random_plus"] = condition(ctx, steer(ctx, rand, alpha), n, seed=2)
    sentiment.update(
        samples=n,
        prime=PRIME.decode(),
        alpha=alpha,
        intervention=(
            "IMDB probe direction w/σ (mean_cell_hidden): cell half added to the cell, hidden "
            "half to the hidden state, times α, at every step"
        ),
        judge={
            "kind": "TF-IDF uni+bigrams + logistic regression",
            "train_reviews": args.bow_train,
            "C": ctx.judge.C,
            "dev_acc": ctx.judge.dev_acc,
        },
    )
    out["sentiment"] = sentiment
    m = args.attempt_samples
    for scale in (4.0, 16.0):
        out["attempts"].append(
            pair(
                ctx,
                lambda s, a=scale * alpha: steer(ctx, d, s * a),
                m,
                f"probe direction, α × {scale:g}",
            )
        )
    cand = {"candidate": d["cell"]}
    for scale in (1.0, 8.0):
        out["attempts"].append(
            pair(
                ctx,
                lambda s, a=scale * alpha: steer(ctx, cand, s * a),
                m,
                f"cell half on the candidate pre-activation, α × {scale:g}",
            )
        )
    for place in ("cell", "hidden"):
        half = {place: d[place]}
        out["attempts"].append(
            pair(
                ctx,
                lambda s, a=4 * alpha, h=half: steer(ctx, h, s * a),
                m,
                f"probe direction, {place} half only, α × 4",
            )
        )
    for k, value in ((1, 3.0), (3, 3.0), (3, 10.0)):
        units = top_units(ctx, k)
        out["attempts"].append(
            pair(
                ctx,
                lambda s, u=units, v=value: build_intervention(
                    ctx.loaded, clamp={unit: s * sign * v for unit, sign in u}
                ),
                m,
                f"top {k} unit(s) {[u for u, _ in units]} clamped to ±{value:g} (by weight sign)",
            )
        )
    out["figure"] = sample_figure(ctx, d, alpha)
    return out


def sample_figure(ctx, d: dict[str, np.ndarray], alpha: float) -> str:
    """One unsteered and one steered (+) sample, each coloured by the probe's top unit."""
    unit = top_units(ctx, 1)[0][0]
    texts, values = [], []
    for iv in (None, steer(ctx, d, alpha)):
        sample = draw(ctx, iv, 1, seed=5)[0].split(b"\n")[0]
        with intervening(ctx.loaded.model, iv):
            cells = byte_cell_states(ctx.loaded, [ctx.prime + sample])[0]
        texts.append(ctx.prime[1:] + sample)
        values.append(neuron_values(cells[1:], unit))
    titles = ["unsteered", f"steered + (α = {alpha:.3g}, probe direction)"]
    path = ctx.args.out.with_name("neurons_steered_sample.png")
    plots.coloured_texts_png(
        texts,
        values,
        titles,
        path,
        ctx.args.figures / "steered_sample.png",
        f"tanh of unit {unit}'s cell state",
    )
    return path.name


def markdown(s: dict) -> str:
    """The steering figures as tables."""
    lines = [
        "| positive control | place | β | digits none | digits + | digits random | passes |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    controls = [s["positive_control"]] + [
        a["positive_control"] for a in s["attempts"] if "positive_control" in a
    ]
    for c in controls:
        lines.append(
            f"| {c['direction'].split(' (')[0]} | {c['place']} | {c['beta']:g} | "
            f"{c['target_fraction_none']:.4f} | {c['target_fraction_plus']:.4f} | "
            f"{c['target_fraction_random']:.4f} | {c['passes']} |"
        )
    lines += [
        "",
        "| sentiment condition | positive | 95% interval | bpb (intact model) | n |",
        "|---|---:|---|---:|---:|",
    ]
    sentiment = s["sentiment"]
    for name in ("minus", "none", "plus", "random_minus", "random_plus"):
        c = sentiment[name]
        lines.append(
            f"| {name} | {c['positive_fraction']:.3f} | {c['interval95'][0]:.3f}–"
            f"{c['interval95'][1]:.3f} | {c['bpb']:.3f} | {c['samples']} |"
        )
    for a in s["attempts"]:
        if "setting" not in a:
            continue
        for sign in ("minus", "plus"):
            c = a[sign]
            lines.append(
                f"| {a['setting']}, {sign} | {c['positive_fraction']:.3f} | "
                f"{c['interval95'][0]:.3f}–{c['interval95'][1]:.3f} | {c['bpb']:.3f} | "
                f"{c['samples']} |"
            )
    return "\n".join(lines)
