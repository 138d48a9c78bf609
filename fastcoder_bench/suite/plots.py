"""PNG plots of a report (matplotlib, Agg backend; optional: skipped without matplotlib).

- ``speedup.png``: decode speedup over AR per method: per-task spread (box, p10–p90
  whiskers) and the aggregate ratio (diamond);
- ``retrieval_by_line_pos.png``: retrieval success rate by the token's position within
  its line, for the retrieving methods (like the FastCoder paper's Fig. 3/6);
- ``accept_hist.png``: share of decode steps by accepted draft length.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MAX_POS = 16


def make_plots(report: dict[str, Any], out: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed: no plots (pip install 'fastcoder[bench]')")
        return []
    import numpy as np

    methods = report["methods"]
    title = f"{report['model']} {report['dtype']}, {report.get('run', {}).get('spec', {}).get('suite', '')}, {report['tasks']} tasks"
    files: list[str] = []

    # ---- speedup with spread
    names = [n for n in methods if n != "ar"]
    if names:
        per = {n: [row["methods"][n]["speedup_vs_ar"] for row in report["per_task"] if n in row["methods"]] for n in names}
        per = {n: [x for x in v if x is not None] for n, v in per.items()}
        fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(names), 4))
        data = [per[n] or [np.nan] for n in names]
        ax.boxplot(data, whis=(10, 90), showfliers=True, widths=0.5)
        ax.set_xticks(range(1, len(names) + 1), names, rotation=20, ha="right")
        agg = [methods[n]["speedup_vs_ar"] or np.nan for n in names]
        ax.scatter(range(1, len(names) + 1), agg, marker="D", color="tab:red", zorder=3, label="aggregate (total time / total tokens)")
        for i, v in enumerate(agg, start=1):
            if v == v:
                ax.annotate(f"{v:.2f}×", (i, v), textcoords="offset points", xytext=(12, 0), va="center", fontsize=8)
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_ylabel("decode speedup over AR")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        path = out / "speedup.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        files.append(str(path))

    # ---- retrieval success by position in line
    ret = [n for n, m in methods.items() if m.get("retrieval_by_line_pos")]
    if ret:
        grid = np.full((len(ret), MAX_POS), np.nan)
        counts = np.zeros((len(ret), MAX_POS), dtype=int)
        for i, n in enumerate(ret):
            for k, (att, hit) in methods[n]["retrieval_by_line_pos"].items():
                j = min(int(k), MAX_POS - 1)
                counts[i, j] += att
                grid[i, j] = (0 if np.isnan(grid[i, j]) else grid[i, j]) + hit
        rate = np.where(counts > 0, grid / np.maximum(counts, 1), np.nan)
        fig, ax = plt.subplots(figsize=(10, 0.8 + 0.55 * len(ret)))
        im = ax.imshow(rate, aspect="auto", cmap="viridis", vmin=0, vmax=1)
        ax.set_yticks(range(len(ret)), ret)
        ax.set_xticks(range(MAX_POS), [str(i) if i < MAX_POS - 1 else f"{i}+" for i in range(MAX_POS)])
        ax.set_xlabel("position of the next token within its line (0 = first non-whitespace token)")
        for i in range(len(ret)):
            for j in range(MAX_POS):
                if counts[i, j]:
                    ax.text(j, i, f"{rate[i, j]:.2f}", ha="center", va="center", fontsize=6,
                            color="white" if rate[i, j] < 0.6 else "black")
        fig.colorbar(im, ax=ax, label="retrieval success rate")
        ax.set_title("retrieval success by token position in the line — " + title, fontsize=9)
        fig.tight_layout()
        path = out / "retrieval_by_line_pos.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        files.append(str(path))

    # ---- accepted length histogram
    if names:
        maxlen = 16
        fig, ax = plt.subplots(figsize=(9, 4))
        width = 0.8 / len(names)
        for i, n in enumerate(names):
            hist = methods[n]["accept_length_hist"]
            total = sum(hist.values()) or 1
            vals = np.zeros(maxlen + 1)
            for k, v in hist.items():
                vals[min(int(k), maxlen)] += v
            ax.bar(np.arange(maxlen + 1) + i * width - 0.4 + width / 2, vals / total, width=width, label=n)
        ax.set_xticks(range(maxlen + 1), [str(i) if i < maxlen else f"{i}+" for i in range(maxlen + 1)])
        ax.set_xlabel("draft tokens accepted in a step (the bonus token not counted)")
        ax.set_ylabel("share of decode steps")
        ax.legend(fontsize=7)
        ax.set_title("accepted draft length — " + title, fontsize=9)
        fig.tight_layout()
        path = out / "accept_hist.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        files.append(str(path))
    return files
