"""PyTorch: its entry in the routing table (``library``), CUDA tensors' adapter (``arrays``), CPU
tensors through NumPy views (``host``), every op as a ``torch.library`` custom op (``ops``) with its
backward (``grad``) and call options (``options``), and a tile program's custom op
(``program_op``), each registered as torch loads (``after_load``). Nothing here imports torch
before the caller has."""
