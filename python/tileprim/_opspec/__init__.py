"""What an op is, as Python reads it: the C++ op table (``table``), each op's docstring (``docs``)
and its derivatives (``derivatives``, read by torch's backward and a tile program's)."""
