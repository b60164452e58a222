"""How values read on screen: ages, sizes, losses, step status glyphs. Plain functions, no widgets,
so tables, the job bar and tests agree on one spelling."""

from __future__ import annotations

from backend.quantity import size_text

# Step status → (glyph, word, style). The word keeps state readable with NO_COLOR or a monochrome
# projector; the colour is a second channel, never the only one.
STATUS_LOOK: dict[str, tuple[str, str, str]] = {
    "todo": ("○", "todo", "dim"),
    "running": ("◐", "running", "bold $warning"),
    "done": ("✔", "done", "bold $success"),
    "failed": ("✘", "failed", "bold $error"),
}

# Pod phase → style; the phase word is always shown beside it.
PHASE_STYLE: dict[str, str] = {
    "Pending": "yellow",
    "Running": "bold green",
    "Succeeded": "blue",
    "Failed": "bold red",
    "Unknown": "magenta",
}

JOB_PHASE_STYLE: dict[str, str] = {
    "Created": "yellow",
    "Running": "bold green",
    "Restarting": "bold yellow",
    "Complete": "bold blue",
    "Failed": "bold red",
}

# One colour per rank in the logs (cycled); chosen to stay apart in 256 colours and on light or dark.
RANK_COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta")


DRIVER_LABEL = "drv"  # a RayJob's driver (rank -1): it has no rank of its own


def rank_label(rank: int) -> str:
    """What the pods table and log prefixes show for a rank: "0", "1"… or "drv"."""
    return DRIVER_LABEL if rank < 0 else str(rank)


def ranks_label(ranks: "tuple[int, ...] | range") -> str:
    """`rank 1`, `ranks 2-3`: the ranks of one pod (one per process it runs), for sentences."""
    ranks = tuple(ranks)
    if len(ranks) == 1:
        return f"rank {rank_label(ranks[0])}"
    return f"ranks {pod_ranks(ranks)}"


def pod_ranks(ranks: "tuple[int, ...] | range") -> str:
    """A pod's RANK cell: `1`, or `2-3` for a pod that runs two."""
    ranks = tuple(ranks)
    if len(ranks) > 1 and ranks == tuple(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ",".join(map(rank_label, ranks))


def rank_sort_key(label: str) -> int:
    """Workers by rank, the driver after them (its row is not the one to kill by accident)."""
    first = label.split("-")[0]
    return int(first) if first.isdigit() else 1_000_000


def node_name(node: str) -> str:
    """A node as the pods table shows it: kind's node names (`kfcockpit-worker2`, `kind-worker`,
    `kind-control-plane`) without the cluster's name before them; "-" for none (not scheduled)."""
    if not node:
        return "-"
    for role in ("-worker", "-control-plane"):
        if role in node:
            return node[node.index(role) + 1:]
    return node


def short_name(pod: str, job: str | None) -> str:
    """What tells pods apart inside one job; the panel title already names the job. JobSet names
    pods `<job>-<replicated job>-<job index>-<pod index>-<random>`, a RayJob's worker pods are
    `<job>-worker-<rank>-<random>`: both show `<index>-<random>` (the random part changes with
    each restart attempt). A RayJob's one driver pod `<job>-driver-<random>` shows "driver"."""
    if job and pod.startswith(job + "-"):
        parts = pod[len(job) + 1:].split("-")
        if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
            return f"{parts[2]}-{parts[3]}"
        if len(parts) == 3 and parts[0] == "worker" and parts[1].isdigit():
            return f"{parts[1]}-{parts[2]}"
        if len(parts) == 2 and parts[0] == "driver":
            return "driver"
        return pod[len(job) + 1:]
    return pod


def fit(name: str, width: int) -> str:
    """`name` in at most `width` cells, losing its middle rather than its end: generated names
    differ at the end (`…-a1b2c3`), and a name cut at its end no longer says which one it is."""
    if len(name) <= width:
        return name
    if width < 2:
        return name[:width]
    tail = (width - 1) // 2
    return name[: width - 1 - tail] + "…" + name[len(name) - tail:]


def rank_colour(rank: int) -> str:
    return RANK_COLOURS[rank % len(RANK_COLOURS)]


def age(seconds: float | None) -> str:
    """kubectl's short age: 42s, 3m12s, 2h5m, 4d3h."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s}s" if m < 10 and s else f"{m}m"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m}m" if m else f"{h}h"
    d, h = divmod(h, 24)
    return f"{d}d{h}h" if h else f"{d}d"


def size(n: int | None) -> str:
    return "-" if n is None else size_text(n)


def cpu(cores: float | None) -> str:
    """CPU in at most 4 cells: millicores as `kubectl top` shows them ("250m"), cores from one
    ("1.25", "12.5", "128")."""
    if cores is None:
        return "-"
    if cores < 0.9995:
        return f"{round(cores * 1000)}m"
    return f"{cores:.2f}" if cores < 9.995 else f"{cores:.1f}" if cores < 99.95 else f"{cores:.0f}"


def memory(n: float | None) -> str:
    """Memory in Kubernetes' binary units in at most 5 cells: "980Ki", "512Mi", "1.2Gi", "15Gi"."""
    if n is None:
        return "-"
    for unit, scale in (("", 1), ("Ki", 2**10), ("Mi", 2**20)):
        if round(n / scale) < 1000:
            return f"{round(n / scale)}{unit}"
    gi = n / 2**30
    return f"{gi:.1f}Gi" if round(gi, 1) < 10 else f"{gi:.0f}Gi"


def loss(value: float | None) -> str:
    return "-" if value is None else f"{value:.6f}"


def step(value: int | None) -> str:
    return "-" if value is None else str(value)


def since(at: float | None, origin: float | None) -> str:
    """A time as seconds after `origin` (a job's first attempt's start): '+12.3s', '-' when unknown."""
    if at is None or origin is None:
        return "-"
    return f"+{at - origin:.1f}s"


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f} s" if value < 120 else age(value)


def pod_reason(pod) -> str:
    """How a pod ended (or why it waits): 'Killed 137', 'Error 1', 'Unschedulable'."""
    if pod.exit_code is not None and pod.exit_code != 0:
        return f"{pod.reason or 'exit'} {pod.exit_code}"
    return pod.reason if pod.phase.value != "Running" else ""
