"""The arrays tileprim reads and makes: element types (``dtypes``), what every device-array adapter
is and the keys a call signature takes of an array (``adapters``), CuPy's adapter (``cupy``), and
the routing table (``routing``) through which the call path meets array libraries it never
imports. Beneath the call path; imports nothing of tileprim but the compiled core."""
