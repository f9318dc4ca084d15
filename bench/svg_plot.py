"""Log-log line plots as SVG, with nothing beyond the standard library.

Shared by bench/compare (busbw against size) and bench/scaling (predicted
time against rank count).
"""
import math

COLOURS = ["#d62728", "#ff7f0e", "#1f77b4", "#17becf", "#9467bd", "#2ca02c", "#8c564b", "#7f7f7f"]


def loglog(title, lines, x_ticks, bold=(), dashed=()):
    """lines: {label: [(x, y), ...]} with x, y > 0; x_ticks: [(x, text)].

    Labels in `bold` are drawn thick, those in `dashed` dashed.
    """
    lines = {label: [(x, y) for x, y in pts if x > 0 and y > 0] for label, pts in lines.items()}
    lines = {label: pts for label, pts in lines.items() if pts}
    if not lines:
        return None
    xs = [x for pts in lines.values() for x, _ in pts]
    ys = [y for pts in lines.values() for _, y in pts]
    x0, x1 = math.log10(min(xs)), math.log10(max(xs))
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    w, h, left, right, top, bottom = 720, 440, 70, 190, 30, 50
    px = lambda x: left + (math.log10(x) - x0) / max(x1 - x0, 1e-9) * (w - left - right)
    py = lambda y: h - bottom - (math.log10(y) - y0) / max(y1 - y0, 1e-9) * (h - top - bottom)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="18" text-anchor="middle" font-size="13">{title}</text>']
    for e in range(y0, y1 + 1):
        y = py(10 ** e)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{w - right}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{10.0 ** e:g}</text>')
    for x_value, text in x_ticks:
        x = px(x_value)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{h - bottom}" stroke="#eee"/>')
        out.append(f'<text x="{x:.1f}" y="{h - bottom + 16}" text-anchor="middle">{text}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{w - left - right}" height="{h - top - bottom}" fill="none" stroke="#555"/>')
    for i, (label, pts) in enumerate(lines.items()):
        colour = COLOURS[i % len(COLOURS)]
        width = 3 if label in bold else 1.5
        dash = ' stroke-dasharray="6,4"' if label in dashed else ""
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="{width}"{dash}/>')
        ly = top + 14 + 16 * i
        out.append(f'<line x1="{w - right + 10}" y1="{ly - 4}" x2="{w - right + 30}" y2="{ly - 4}" stroke="{colour}" stroke-width="{width}"{dash}/>')
        out.append(f'<text x="{w - right + 35}" y="{ly}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def size_name(size):
    if size < 1024:
        return f"{size} B"
    return f"{size >> 10} KiB" if size < 1 << 20 else f"{size >> 20} MiB"
