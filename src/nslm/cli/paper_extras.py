"""The paper's extra columns of ``nslm eval RUN``: ``--cache`` (the neural cache), ``--crnn``
(a char-LSTM per class), ``--best`` (NSLM-best, the strongest proper model of the run) and
``--by-rarity`` (Figure 3), with the options that tune them.

:func:`paper_options` declares the options; :class:`PaperExtras` turns their values into the
column sources ``eval_tables`` mixes in, in the order that matters (the CRNN before the cache,
which mixes with it; the rarity recorder last, so it sees every column), and writes the rarity
tables afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from nslm.cli.options import dir_option, int_range_option, list_option
from nslm.errors import NslmError

if TYPE_CHECKING:
    from nslm.evaluation.columns import ColumnSource
    from nslm.runs.load import LoadedRun
    from nslm.scores.passes import Scorer

# builds a column source (a 5-gram, a cache, …) for the loaded run and its scorer
Factory = Callable[["LoadedRun", "Scorer"], "ColumnSource"]

# ~1,500 steps of 64 tokens bring every WikiText-2 class's CRNN to about its class unigram on
# valid; the default 3 epochs of 256 left <city> at 10⁶ (measured).
CRNN_STEPS = 1500
CRNN_MAX_SECONDS = 300.0


def _numbers(given: tuple[str, ...] | None, kind: type, option: str) -> tuple | None:
    """The numbers of a list option (already split at commas by its callback)."""
    if not given:
        return None
    try:
        return tuple(kind(v) for v in given)
    except ValueError:
        text = ",".join(given)
        raise NslmError(f"{option} takes comma-separated numbers, not {text!r}") from None


def paper_options(command: Callable) -> Callable:
    """The click options of the paper's extras, outermost last."""
    options = [
        click.option(
            "--cache",
            is_flag=True,
            help="Add a neural-cache column for every model (the paper's Num/Geo "
            "Cache rows; window, θ, λ tuned on valid).",
        ),
        list_option(
            "--cache-window",
            metavar="W1,W2,…",
            help="Cache windows to try [100,250,500,1000; --best: 500,1000,2000,3000,5000].",
        ),
        list_option(
            "--cache-theta",
            metavar="T1,T2,…",
            help="Cache θ values to try [0.1,0.25,0.5,0.75,1; --best: 0.25,0.5,0.75,1].",
        ),
        list_option(
            "--cache-lambda",
            metavar="L1,L2,…",
            help="Cache λ values to try, in (0, 1] [0.05,0.1,…,0.7].",
        ),
        click.option(
            "--crnn",
            is_flag=True,
            help="Add the CRNN column (a char-LSTM per class, trained once).",
        ),
        dir_option("--crnn-dir", help="Where the CRNN weights are kept [RUN/crnn]."),
        int_range_option(
            "--crnn-steps",
            high=10**6,
            default=CRNN_STEPS,
            help="CRNN training steps per class, at least (3 epochs if more; batch 64).",
        ),
        click.option(
            "--crnn-max-seconds",
            type=click.FloatRange(min=0, min_open=True),
            default=CRNN_MAX_SECONDS,
            show_default=True,
            help="Cap on each class's CRNN training time.",
        ),
        click.option(
            "--best",
            is_flag=True,
            help="Add NSLM-best, the strongest proper model: NNLM, NSLM (with "
            "context micro-models if fitted), 5-gram, 5-gram NSLM and the neural, "
            "class and unigram caches interpolated, every weight and window tuned "
            "on valid (implies --ngram 5).",
        ),
        click.option(
            "--by-rarity",
            is_flag=True,
            help="Perplexity per training-count bucket for every column (Figure 3): "
            "RUN/rarity_<split>.json and .png.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


class PaperExtras:
    """The column-source factories of the chosen options, and what is left to do after."""

    def __init__(
        self,
        *,
        cache: bool = False,
        cache_window: tuple[str, ...] = (),
        cache_theta: tuple[str, ...] = (),
        cache_lambda: tuple[str, ...] = (),
        crnn: bool = False,
        crnn_dir: Path | None = None,
        crnn_steps: int = CRNN_STEPS,
        crnn_max_seconds: float = CRNN_MAX_SECONDS,
        best: bool = False,
        by_rarity: bool = False,
    ) -> None:
        from nslm.mixtures.best_column import BEST_GRID
        from nslm.mixtures.cache_column import CacheGrid
        from nslm.mixtures.char_rnn import CharRNNConfig

        given = {
            "--cache-window": cache_window,
            "--cache-theta": cache_theta,
            "--cache-lambda": cache_lambda,
        }
        stray = [name for name, value in given.items() if value]
        if stray and not (cache or best):
            raise NslmError(f"{stray[0]} needs --cache or --best")
        windows = _numbers(cache_window, int, "--cache-window")
        thetas = _numbers(cache_theta, float, "--cache-theta")
        grid = CacheGrid()
        self.grid = CacheGrid(
            windows=windows or grid.windows,
            thetas=thetas or grid.thetas,
            lambdas=_numbers(cache_lambda, float, "--cache-lambda") or grid.lambdas,
        )
        # NSLM-best's cache: the same windows and θ when given, else a wider grid (its
        # weights replace the λ grid: EM finds them)
        self.best_grid = CacheGrid(
            windows=windows or BEST_GRID.windows, thetas=thetas or BEST_GRID.thetas
        )
        self.cache, self.crnn, self.best, self.by_rarity = cache, crnn, best, by_rarity
        self.crnn_dir = crnn_dir
        self.crnn_config = CharRNNConfig(
            epochs=3, batch_size=64, min_steps=crnn_steps, max_seconds=crnn_max_seconds
        )
        self.recorder = None
        self.loaded = None

    @property
    def wanted(self) -> bool:
        return self.cache or self.crnn or self.best or self.by_rarity

    @property
    def keep_features(self) -> bool:
        """Whether the scorer keeps the backbone's states (the cache reads them)."""
        return self.cache or self.best

    def _crnn(self, loaded, scorer):
        from nslm.mixtures.crnn_column import CRNNSource

        directory = self.crnn_dir or Path(loaded.run_dir) / "crnn"

        def progress(message: str) -> None:
            click.echo(f"  {message}", err=True)

        return CRNNSource(scorer, loaded.corpus, directory, self.crnn_config, progress)

    def _cache(self, loaded, scorer):
        from nslm.mixtures.cache_column import CacheSource

        return CacheSource(scorer, self.grid)

    def _recorder(self, loaded, scorer):
        from nslm.evaluation.rarity import RarityRecorder

        self.loaded = loaded
        self.recorder = RarityRecorder()
        return self.recorder

    def factories(self, others: Sequence[Factory] = ()) -> list[Factory]:
        """CRNN, cache, then ``others`` (e.g. an n-gram column), then the rarity recorder."""
        out: list[Factory] = []
        if self.crnn:
            out.append(self._crnn)
        if self.cache:
            out.append(self._cache)
        out += list(others)
        if self.by_rarity:
            out.append(self._recorder)
        return out

    def finish(self, run: Path) -> None:
        """Print and write the rarity tables of every reported split."""
        if not self.by_rarity or self.recorder is None:
            return
        from nslm.evaluation.rarity import BUCKETS, plot_rarity_panels, render_rarity
        from nslm.evaluation.tables import TABLES
        from nslm.files.atomic import write_json_atomic

        corpus = self.loaded.corpus
        for split in self.recorder.columns:
            tables = self.recorder.tables(split, corpus)
            for table, data in tables.items():
                title = f"{TABLES[table][1] or 'User'} tokens by training count ({split})"
                click.echo(render_rarity(data, title) + "\n")
            payload = {
                "run": str(run),
                "split": split,
                "buckets": [[label, low, high] for label, low, high in BUCKETS],
                "tables": tables,
            }
            path = Path(run) / f"rarity_{split}.json"
            write_json_atomic(path, payload)
            png = Path(run) / f"rarity_{split}.png"
            panels = {TABLES[t][1] or "User classes": d for t, d in tables.items()}
            plot_rarity_panels(panels, png, f"Perplexity by training count ({split})")
            click.echo(f"wrote {path} and {png}")
