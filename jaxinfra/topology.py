"""The topology picture: per job, node pool -> slices -> hosts (pods, by hostname and rank) -> devices.

A self-contained SVG: no script, no external font or link, and the same bytes for the same input
on any machine (every number an integer, every element in rank order). Past a size, slices and
hosts collapse into one dashed box per range that says how many it stands for, so a 6,144-host
job draws as a few dozen boxes. The same picture serves `jaxinfra explain --svg` (from a plan:
`jaxinfra.explain.layout`) and the simulation's HTML report (from the simulated pods, coloured by how
each one ended). A pure drawing: it imports nothing of jaxinfra, so neither side reaches into the other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

#: Slices with more hosts than this show the first HEAD_HOSTS, a range, and the last host.
HOST_COLLAPSE = 32
HEAD_HOSTS = 6
#: Jobs with more slices than this show the first HEAD_SLICES, a range, and the last slice.
SLICE_COLLAPSE = 4
HEAD_SLICES = 2
#: Host boxes per row inside a slice; device squares drawn per host (the rest as "+N").
HOSTS_PER_ROW = 8
DEVICES_DRAWN = 16

DEVICE_NOUN = {"tpu": "chips", "gpu": "GPUs", "cpu": "CPU devices"}
#: Fill of a host box by how its pod ended (the report); a plan's hosts have no phase.
PHASE_FILL = {
    None: "#ffffff",
    "succeeded": "#dcf3dc",
    "failed": "#f9d4d4",
    "running": "#d6e6f9",
    "initializing": "#fbf0c8",
    "pending": "#eeeeee",
}

PAD = 12
HOST_H = 58
GAP = 8
SLICE_HEAD = 24
LINE = 17
CHAR_MONO = 7  # px per character at 11px monospace (0.6 em, rounded up)
CHAR_SANS = 7  # px per character at 12px sans-serif, generous
DEVICE = 10


@dataclass(frozen=True)
class Layout:
    """What the picture shows of one job: built from a plan (`jaxinfra.explain.layout`) or from simulated pods."""

    title: str  # "ml/train (JobSet)"
    pool: str  # the node pool and its machines
    slices: int  # TPU slices (JobSet child Jobs), else 1
    hosts_per_slice: int
    devices_per_host: int
    device_kind: str  # "tpu" | "gpu" | "cpu"
    hostname: Callable[[int], str]  # pod hostname by global rank
    group: Callable[[int], str]  # a slice's own object, e.g. "Job train-slice-0"
    coordinator: str  # host:port
    service: str | None  # the headless Service (the pods' subdomain)
    queue: str | None = None  # the Kueue LocalQueue
    phase: Callable[[int], str | None] = lambda rank: None  # how the pod of a rank ended (the report)

    @property
    def hosts(self) -> int:
        return self.slices * self.hosts_per_slice


def shown(count: int, collapse: int, head: int) -> list[int | tuple[int, int]]:
    """Indices drawn one by one, with (first, last) for a collapsed range."""
    if count <= collapse:
        return list(range(count))
    return [*range(head), (head, count - 2), count - 1]


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}–{last}"


def _text(
    x: int, y: int, content: str, size: int = 12, weight: str = "normal", mono: bool = False, fill: str = "#222"
) -> str:
    family = "monospace" if mono else "sans-serif"
    bold = ' font-weight="bold"' if weight == "bold" else ""
    return (
        f'<text x="{x}" y="{y}" font-family="{family}" font-size="{size}"{bold} fill="{fill}">{escape(content)}</text>'
    )


class _Canvas:
    """Elements in drawing order, and the extent they cover."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.width = 0

    def add(self, element: str, right: int = 0) -> None:
        self.parts.append(element)
        self.width = max(self.width, right)


def _host(c: _Canvas, lay: Layout, rank: int, x: int, y: int, w: int) -> None:
    name = lay.hostname(rank)
    phase = lay.phase(rank)
    coordinator = rank == 0
    tip = f"{name}: rank {rank}" + (", coordinator" if coordinator else "") + (f", {phase}" if phase else "")
    c.add(f'<g class="host" data-rank="{rank}"><title>{escape(tip)}</title>')
    stroke = ' stroke="#b35900" stroke-width="3"' if coordinator else ' stroke="#555" stroke-width="1"'
    c.add(
        f'<rect x="{x}" y="{y}" width="{w}" height="{HOST_H}" rx="4" '
        f'fill="{PHASE_FILL.get(phase, "#ffffff")}"{stroke}/>',
        x + w,
    )
    c.add(_text(x + 6, y + 15, name, 11, "bold" if coordinator else "normal", mono=True))
    c.add(
        _text(
            x + 6,
            y + 30,
            f"rank {rank}" + (" · coordinator" if coordinator else "") + (f" · {phase}" if phase else ""),
            11,
        )
    )
    drawn = min(lay.devices_per_host, DEVICES_DRAWN)
    for d in range(drawn):
        c.add(
            f'<rect class="device" x="{x + 6 + d * (DEVICE + 3)}" y="{y + 38}" width="{DEVICE}" height="{DEVICE}" '
            'fill="#4a78b5"/>'
        )
    if lay.devices_per_host > drawn:
        c.add(_text(x + 8 + drawn * (DEVICE + 3), y + 47, f"+{lay.devices_per_host - drawn}", 10))
    c.add("</g>")


def _host_range(c: _Canvas, lay: Layout, s: int, first: int, last: int, x: int, y: int, w: int) -> None:
    base = s * lay.hosts_per_slice
    c.add(
        f'<g class="host-range"><rect x="{x}" y="{y}" width="{w}" height="{HOST_H}" rx="4" fill="#f4f4f4" '
        f'stroke="#777" stroke-dasharray="4 3"/>',
        x + w,
    )
    c.add(_text(x + 6, y + 15, f"{last - first + 1} hosts: {_span(first, last)}", 11, "bold"))
    c.add(_text(x + 6, y + 30, f"ranks {_span(base + first, base + last)}", 11))
    c.add(_text(x + 6, y + 47, f"{lay.devices_per_host} {DEVICE_NOUN.get(lay.device_kind, 'devices')} each", 11))
    c.add("</g>")


def _slice(c: _Canvas, lay: Layout, s: int, x: int, y: int, host_w: int) -> int:
    """One slice's box with its hosts; returns its height."""
    hosts = shown(lay.hosts_per_slice, HOST_COLLAPSE, HEAD_HOSTS)
    rows = -(-len(hosts) // HOSTS_PER_ROW)
    per_row = min(len(hosts), HOSTS_PER_ROW)
    base = s * lay.hosts_per_slice
    label = (
        f"{'slice ' + str(s) + ' · ' if lay.slices > 1 or lay.device_kind == 'tpu' else ''}{lay.group(s)} · "
        f"{lay.hosts_per_slice} hosts, ranks {_span(base, base + lay.hosts_per_slice - 1)}"
    )
    w = max(2 * GAP + per_row * host_w + (per_row - 1) * GAP, 2 * GAP + CHAR_SANS * len(label))
    h = SLICE_HEAD + rows * (HOST_H + GAP)
    c.add(
        f'<g class="slice" data-slice="{s}"><rect x="{x}" y="{y}" width="{w}" height="{h}" rx="6" fill="#f3f6fb" '
        'stroke="#8aa0c0"/>',
        x + w,
    )
    c.add(_text(x + GAP, y + 16, label, 12, "bold"))
    for i, item in enumerate(hosts):
        hx = x + GAP + (i % HOSTS_PER_ROW) * (host_w + GAP)
        hy = y + SLICE_HEAD + (i // HOSTS_PER_ROW) * (HOST_H + GAP)
        if isinstance(item, tuple):
            _host_range(c, lay, s, *item, hx, hy, host_w)
        else:
            _host(c, lay, base + item, hx, hy, host_w)
    c.add("</g>")
    return h


def _slice_range(c: _Canvas, lay: Layout, first: int, last: int, x: int, y: int) -> int:
    n = last - first + 1
    h = 2 * LINE + GAP
    label = (
        f"slices {_span(first, last)}: {n} more slices like these, {n * lay.hosts_per_slice} hosts, "
        f"ranks {_span(first * lay.hosts_per_slice, (last + 1) * lay.hosts_per_slice - 1)}"
    )
    w = 2 * GAP + CHAR_SANS * len(label)
    c.add(
        f'<g class="slice-range"><rect x="{x}" y="{y}" width="{w}" height="{h}" rx="6" fill="#f7f7f7" '
        f'stroke="#8aa0c0" stroke-dasharray="6 4"/>',
        x + w,
    )
    c.add(_text(x + GAP, y + LINE + 4, label, 12))
    c.add("</g>")
    return h


def _job(c: _Canvas, lay: Layout, y: int) -> int:
    """One job's panel; returns the y below it."""
    noun = DEVICE_NOUN.get(lay.device_kind, "devices")
    lines = [
        (
            f"{lay.title}: {lay.slices} × {lay.hosts_per_slice} hosts = {lay.hosts} pods, "
            f"{lay.hosts * lay.devices_per_host} {noun}",
            "bold",
        ),
        (lay.pool, "normal"),
        ((f"Service {lay.service} · " if lay.service else "") + f"coordinator {lay.coordinator}", "normal"),
        *([(lay.queue, "normal")] if lay.queue else []),
    ]
    c.add('<g class="job">')
    for i, (line, weight) in enumerate(lines):
        c.add(_text(PAD, y + LINE * (i + 1), line, 13 if i == 0 else 12, weight), PAD + CHAR_SANS * len(line))
    y += LINE * len(lines) + GAP
    names = [
        lay.hostname(s * lay.hosts_per_slice + h)
        for s in _flat(shown(lay.slices, SLICE_COLLAPSE, HEAD_SLICES))
        for h in _flat(shown(lay.hosts_per_slice, HOST_COLLAPSE, HEAD_HOSTS))
    ]
    status = max((len(lay.phase(r) or "") for r in range(min(lay.hosts, HOST_COLLAPSE))), default=0)
    host_w = max(
        150,
        12 + CHAR_MONO * max(map(len, names)),
        12 + CHAR_SANS * (len("rank 0 · coordinator · ") + status),
        12 + (DEVICE + 3) * min(lay.devices_per_host, DEVICES_DRAWN) + 24,
    )
    for item in shown(lay.slices, SLICE_COLLAPSE, HEAD_SLICES):
        if isinstance(item, tuple):
            y += _slice_range(c, lay, *item, PAD, y) + GAP
        else:
            y += _slice(c, lay, item, PAD, y, host_w) + GAP
    c.add("</g>")
    return y


def _flat(items: list[int | tuple[int, int]]) -> list[int]:
    """The indices drawn one by one (a range's own box names no host)."""
    return [i for i in items if isinstance(i, int)]


def svg(layouts: Sequence[Layout], title: str = "jaxinfra topology") -> str:
    """The picture of `layouts`, one panel per job, as a complete SVG document."""
    c = _Canvas()
    y = PAD
    for lay in layouts:
        y = _job(c, lay, y) + GAP
    width, height = c.width + PAD, y
    legend = "thick orange border: the coordinator (rank 0); squares: devices per host; dashed: a collapsed range"
    c.add(_text(PAD, height + 4, legend, 11, fill="#555"), PAD + CHAR_SANS * len(legend))
    width, height = max(width, c.width + PAD), height + PAD
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label={quoteattr(title)}>'
    )
    return (
        "\n".join(
            [
                head,
                f"<title>{escape(title)}</title>",
                f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
                *c.parts,
                "</svg>",
            ]
        )
        + "\n"
    )
