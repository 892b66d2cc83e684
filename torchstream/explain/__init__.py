"""Incremental explanations: iPFI, iSAGE, iPDP and their building blocks."""
