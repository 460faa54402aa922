"""Text generation from a prompt for every nslm LM (SPEC §6): shared sampling, per-LM loops."""
