"""The byte-level LSTM LM, its neuron probes, ablation and steering.

Reading order: ``data`` (byte corpora: text as bytes 0–255) and ``labelled`` (sentiment
and part-of-speech labels for the probes) → ``intervention`` (ablate, clamp or steer units
inside a running LSTM) → ``generation`` (sampling, and each byte's neuron value) and
``colour`` (text coloured by one neuron) → ``steering`` (interventions as a user names
them) → ``probes/`` (which neurons carry sentiment or a tag, against controls).
"""
