"""The call path of a standalone call: its arguments checked and planned by C++ as the program of
one step (``call``), the memo of prepared call signatures that tile programs share and their runs
and ``out=`` checks (``prepared``), the Plan a call shows (``plan``) and exec scopes (``scope``).
It meets torch, JAX and CuPy only through the routing table (``_arrays.routing``)."""
