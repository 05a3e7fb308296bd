"""JAX: its arrays' adapter and entry in the routing table (``arrays``), and ops inside ``jax.jit``
as a host callback (``jit``). Nothing here imports JAX before the caller has."""
