"""What a trial costs before it runs: parameters, optimizer state, activation memory, peak GPU
memory, FLOPs; and what a sweep costs in GPU-hours. Arithmetic on the trial config (no torch):
the sweep layer packs GPUs with it, `validate` and `sweep --dry-run` print it.

- model.py: the counts of one trial config (tests check them against the model as the trainer
  builds it: parameters exactly, saved activations as autograd's saved-tensor hooks see them)
- vocab.py: the vocabulary a data config gives (the embedding's size)
- gpus.py: GPU memory and peak FLOP/s, and the measured throughput the hours are taken from
- table.py: the per-width table of a sweep and the GPU share a trial needs
"""
