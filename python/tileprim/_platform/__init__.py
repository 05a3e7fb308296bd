"""The machine tileprim runs on: which backends serve and the default target (``backends``), and
what this installation can do (``info``: ``tp.info``)."""
