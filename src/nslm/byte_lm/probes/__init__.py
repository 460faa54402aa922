"""Probes of a byte LM's neurons: its cell states (per text, per byte) in, classifiers out.

docs/probes.md has the whole story. The parts:

- :func:`cell_states`: a run (path or loaded) and texts → per-byte cell states;
- :mod:`nslm.byte_lm.probes.states`: the extractor (final and pooled states, per-byte states);
- :mod:`nslm.byte_lm.probes.estimators`: :class:`L1Probe`, :class:`NeuronThreshold`, JSON files;
- :mod:`nslm.byte_lm.probes.sentiment`: SST-2 / IMDB probes beside bag-of-words and majority;
- :mod:`nslm.byte_lm.probes.pos`: one-vs-rest POS probes on UD EWT bytes, top-k neuron tables;
- :mod:`nslm.byte_lm.probes.plots`: weight bars, histograms, a sentence coloured by a neuron;
- :mod:`nslm.byte_lm.probes.pipeline`: a probe end to end (``nslm probe``,
  benchmarks/neurons/neurons.py);
- :mod:`nslm.byte_lm.probes.controls`: control tasks, shuffled labels, random-unit baselines, and
  :mod:`nslm.byte_lm.probes.control_plots` their figures
  (benchmarks/neurons/neuron_interventions.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from nslm.byte_lm.probes.estimators import L1Probe, NeuronThreshold, load_probe, save_probe


def cell_states(run, texts: Sequence[str | bytes], *, batch_size: int = 64) -> list[np.ndarray]:
    """The cell state after every byte of each text, (n_bytes, H) float32 per text.

    ``run``: a byte-LM run directory, or a run already loaded with ``load_run``.
    """
    from nslm.byte_lm.probes.states import byte_cell_states  # torch and the model only when used
    from nslm.runs.load import load_run

    loaded = load_run(run) if isinstance(run, str | Path) else run
    return byte_cell_states(loaded, texts, batch_size=batch_size)


__all__ = ["L1Probe", "NeuronThreshold", "cell_states", "load_probe", "save_probe"]
