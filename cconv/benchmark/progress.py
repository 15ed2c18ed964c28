"""Progress of a long run: one self-rewriting status line on a terminal, plain lines elsewhere.

On a terminal the line shows a bar, the count and the latest case, rewritten in place
(carriage return and erase-line), so a run of many cases keeps the screen clean.  Piped to a
file or a CI log, every case is one ordinary line (``[3/54] ...``) that reads well there.
"""

from __future__ import annotations

import shutil
import sys
from typing import Optional, TextIO

__all__ = ["Progress"]


class Progress:
    """A callable that reports one finished step per call.

    Parameters
    ----------
    total : int
        Steps expected (the bar's full width).
    stream : file-like, optional
        Where to write; default ``sys.stderr``.
    terminal : bool, optional
        Draw the self-rewriting bar; default: whether ``stream`` is a terminal.

    Attributes
    ----------
    done : int
        Steps reported so far.
    """

    def __init__(self, total: int, stream: Optional[TextIO] = None,
                 terminal: Optional[bool] = None) -> None:
        self.total = max(1, int(total))
        self.stream = sys.stderr if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        self.terminal = bool(isatty and isatty()) if terminal is None else terminal
        self.done = 0

    def __call__(self, line: str) -> None:
        """Report that one more step finished, described by ``line``.

        Parameters
        ----------
        line : str
            What the step did (a layer, a pass, its throughput).

        Returns
        -------
        None
        """
        self.done += 1
        count = f"{self.done}/{self.total}"
        if not self.terminal:
            print(f"[{count}] {line}", file=self.stream, flush=True)
            return
        width = shutil.get_terminal_size((100, 24)).columns
        filled = 20 * min(self.done, self.total) // self.total
        head = f"[{'#' * filled}{'.' * (20 - filled)}] {count} "
        text = (head + " ".join(line.split()))[:max(10, width - 1)]
        self.stream.write("\r\033[K" + text)
        self.stream.flush()

    def close(self) -> None:
        """End the status line (on a terminal), so that later output starts on a new line.

        Returns
        -------
        None
        """
        if self.terminal and self.done:
            self.stream.write("\n")
            self.stream.flush()
