"""Operators written in Python (placeholder until the implementation lands)."""


def register_op(*args, **kwargs):
    raise NotImplementedError("weft.register_op")
