"""Training: the loop, the tasks it trains (the stream LM today), lr schedules, checkpoints
and DistributedDataParallel helpers."""
