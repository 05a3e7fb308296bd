"""The op functions users call: written from the op table (``functions``), bound to the call path
as ``tp.sum`` and the rest with ``tp.plan``, ``tp.variants`` and ``tp.op_table`` (``public``), and
``tp.lower``, a call's generated CUDA source (``lower``); ``names`` holds the functions as a
module's names, for the programs of ``layers``."""
