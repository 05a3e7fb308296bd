"""The progress of a run on stderr, the table on stdout: a tqdm bar where tqdm is installed,
otherwise one ``[i/n] case`` line per case."""
from __future__ import annotations

import sys


class _Lines:
    def __init__(self, total: int):
        self.total, self.done = total, 0

    def start(self, name: str) -> None:
        print(f"[{self.done + 1}/{self.total}] {name}", file=sys.stderr, flush=True)

    def finish(self) -> None:
        self.done += 1

    def write(self, text: str) -> None:
        print(text, flush=True)

    def close(self) -> None:
        pass


class _Bar:
    def __init__(self, tqdm, total: int):
        self._tqdm = tqdm
        self._bar = tqdm(total=total, unit="case", file=sys.stderr, dynamic_ncols=True)

    def start(self, name: str) -> None:
        self._bar.set_postfix_str(name)

    def finish(self) -> None:
        self._bar.update(1)

    def write(self, text: str) -> None:
        self._tqdm.write(text, file=sys.stdout)  # clears the bar, prints, redraws it
        sys.stdout.flush()

    def close(self) -> None:
        self._bar.close()


def open_progress(total: int):
    """A progress display for ``total`` cases: ``start(name)`` before a case, ``finish()`` after
    it, ``write(text)`` for a line of the table, ``close()`` at the end.

    Parameters
    ----------
    total : int

    Returns
    -------
    object
        A tqdm bar where tqdm can be imported, else ``[i/n] case`` lines on stderr.
    """
    try:
        from tqdm import tqdm
    except ImportError:
        return _Lines(total)
    return _Bar(tqdm, total)
