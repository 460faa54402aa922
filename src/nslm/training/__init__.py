"""Training: TBPTT batches, the loop, checkpoints and DistributedDataParallel helpers."""
