"""The op functions as this module's names (``tp.sum``, ``tp.cast``...), for the tile programs
written inside the package as a user writes them (``layers``): the package's face imports those
programs, so they cannot import it."""
from .public import OPS

globals().update(OPS)
