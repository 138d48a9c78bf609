"""A rich progress bar on stderr, as a ``progress(done, total)`` callback."""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator


@contextlib.contextmanager
def progress_bar(description: str, *, enabled: bool = True, unit: str = "files") -> Iterator[Callable[..., None]]:
    """Yield ``update(done, total=None, **fields)`` driving a rich bar on stderr.

    Parameters:
        description: the label.
        enabled: False gives a no-op callback (nothing is drawn).
        unit: the word after the counts.
    """
    if not enabled:
        yield lambda *a, **k: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        TextColumn("{task.fields[extra]}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=False,
    ) as bar:
        task = bar.add_task(description, total=None, extra="")

        def update(done: int, total: int | None = None, extra: str = "") -> None:
            bar.update(task, completed=done, total=total, extra=extra)

        yield update
