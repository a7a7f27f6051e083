"""Guards: small named checks that judge a stop before it happens (capacity, training plan, checkpoints, Slurm head)."""
