"""A reduction's result shapes as its custom op and its backward and forward-mode products take them:
``batch_dims`` leading dims, then the tile, whose ``axes`` (tile axes, negative from its end) are reduced."""
from __future__ import annotations

__all__ = ["kept_shape", "reduced_shape"]


def kept_shape(shape: tuple, axes, batch_dims: int) -> tuple:
    """A keepdims reduction's result shape: each reduced tile dim kept as 1."""
    tile = shape[batch_dims:]
    reduced = {a % len(tile) for a in axes}
    return shape[:batch_dims] + tuple(1 if i in reduced else d for i, d in enumerate(tile))


def reduced_shape(shape: tuple, axes, batch_dims: int) -> tuple:
    """A reduction's result shape: the batch, then the tile dims not reduced (none when all are)."""
    tile = shape[batch_dims:]
    reduced = {a % len(tile) for a in axes}
    return shape[:batch_dims] + tuple(d for i, d in enumerate(tile) if i not in reduced)
