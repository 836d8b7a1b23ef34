"""mutransfer: does a learning rate tuned on a small state-space model transfer to a large one?"""

__version__ = "0.1.0"
