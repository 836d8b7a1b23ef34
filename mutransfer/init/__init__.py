"""Data-dependent initialization of SSMs (Liu & Li, ICLR 2025): estimators on data samples.

autocorr: λ_max of the autocorrelation matrix of input sequences and the timescale rule.
memory: a memory function from (input, target) sequences and its dominant frequencies.
Applying them to a model: mutransfer/models/data_init.py.
"""
