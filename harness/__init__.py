"""Reproducibility verification harness for Chainer-family embedding and LSTM implementations.

Data flows one way: strategies -> cases -> runner -> subjects -> compare -> tables.
"""

__version__ = "0.1.0"
