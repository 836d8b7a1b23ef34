"""Selective-scan operators: one function, several backends."""

from mutransfer.ops.scan import BACKENDS, selective_scan

__all__ = ["BACKENDS", "selective_scan"]
