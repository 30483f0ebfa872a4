#!/usr/bin/env python3
"""Draws a Chrome trace-event file (what `meshrt run --trace` / `meshrt train --trace` write) as an
SVG timeline: one row per track (process/thread, named by the file's metadata events), each
complete ("X") event a bar coloured by its category, labelled where it is wide enough. A quick look
without a trace UI; for zooming and queries open the file in https://ui.perfetto.dev or
chrome://tracing.

    python3 tools/trace_svg.py trace.json > timeline.svg
    python3 tools/trace_svg.py trace.json --out timeline.svg --width 1600 --title "mp, step 3"

Standard library only (Debian's python3)."""

import argparse
import html
import json
import sys

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac"]


def load_events(path):
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ValueError(f"{path}: no traceEvents list")
    return events


def tracks_of(events):
    """Returns ({(pid, tid): name}, [X events]) with names from process_name/thread_name."""
    process_names, thread_names = {}, {}
    spans = []
    for e in events:
        ph = e.get("ph")
        if ph == "M" and e.get("name") == "process_name":
            process_names[e.get("pid")] = e.get("args", {}).get("name", "")
        elif ph == "M" and e.get("name") == "thread_name":
            thread_names[(e.get("pid"), e.get("tid"))] = e.get("args", {}).get("name", "")
        elif ph == "X" and "ts" in e:
            spans.append(e)
    keys = sorted({(e.get("pid", 0), e.get("tid", 0)) for e in spans},
                  key=lambda k: (str(k[0]).zfill(8), str(k[1]).zfill(8)))
    names = {}
    for pid, tid in keys:
        parts = [process_names.get(pid, f"pid {pid}"), thread_names.get((pid, tid), f"tid {tid}")]
        names[(pid, tid)] = " / ".join(p for p in parts if p)
    return names, spans


def render(events, width=1400, title=""):
    names, spans = tracks_of(events)
    if not spans:
        raise ValueError("the trace has no complete (X) events")
    t0 = min(e["ts"] for e in spans)
    t1 = max(e["ts"] + e.get("dur", 0) for e in spans)
    label_w, row_h, top = 300, 22, 40 if title else 20
    scale = (width - label_w - 20) / max(t1 - t0, 1e-9)
    # Events of one track that overlap (a step span around its ops) go on sub-rows by depth.
    rows, y = {}, top
    layout = []
    for key in names:
        mine = sorted((e for e in spans if (e.get("pid", 0), e.get("tid", 0)) == key),
                      key=lambda e: (e["ts"], -e.get("dur", 0)))
        ends = []  # the end of the last event on each sub-row
        placed = []
        for e in mine:
            end = e["ts"] + e.get("dur", 0)
            depth = next((i for i, t in enumerate(ends) if t <= e["ts"] + 1e-6), len(ends))
            if depth == len(ends):
                ends.append(end)
            else:
                ends[depth] = end
            placed.append((depth, e))
        rows[key] = (y, max(1, len(ends)))
        layout.append((key, y, placed))
        y += row_h * max(1, len(ends)) + 6
    height = y + 30
    cats = sorted({e.get("cat", "") for e in spans})
    colour = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(cats)}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    if title:
        out.append(f'<text x="10" y="24" font-size="15">{html.escape(title)}</text>')
    for key, y0, placed in layout:
        out.append(f'<text x="6" y="{y0 + 15}">{html.escape(names[key][:48])}</text>')
        for depth, e in placed:
            x = label_w + (e["ts"] - t0) * scale
            w = max(e.get("dur", 0) * scale, 0.5)
            yy = y0 + depth * row_h
            fill = colour[e.get("cat", "")]
            tip = f'{e.get("name", "")} ({e.get("cat", "")}) {e.get("dur", 0) / 1000:.3f} ms'
            args = e.get("args") or {}
            if args:
                tip += " " + ", ".join(f"{k}={v}" for k, v in sorted(args.items()))
            out.append(f'<rect x="{x:.2f}" y="{yy}" width="{w:.2f}" height="{row_h - 3}" '
                       f'fill="{fill}" stroke="white" stroke-width="0.3">'
                       f'<title>{html.escape(tip)}</title></rect>')
            if w > 7 * len(e.get("name", "")) * 0.8:
                out.append(f'<text x="{x + 2:.2f}" y="{yy + 14}" fill="white">'
                           f'{html.escape(e.get("name", ""))}</text>')
    # Time axis and legend.
    span_ms = (t1 - t0) / 1000
    for i in range(11):
        x = label_w + (width - label_w - 20) * i / 10
        out.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 28}" '
                   f'stroke="#ddd" stroke-width="0.5"/>')
        out.append(f'<text x="{x:.1f}" y="{height - 16}" text-anchor="middle">'
                   f'{span_ms * i / 10:.1f} ms</text>')
    lx = label_w
    for c in cats:
        out.append(f'<rect x="{lx}" y="{height - 12}" width="10" height="10" fill="{colour[c]}"/>')
        out.append(f'<text x="{lx + 14}" y="{height - 3}">{html.escape(c or "(none)")}</text>')
        lx += 24 + 7 * len(c or "(none)")
    out.append("</svg>")
    return "\n".join(out) + "\n", {"tracks": len(names), "events": len(spans), "ms": span_ms}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace", help="a Chrome trace-event JSON file")
    p.add_argument("--out", help="write the SVG here (default: standard output)")
    p.add_argument("--width", type=int, default=1400, help="SVG width in pixels (default 1400)")
    p.add_argument("--title", default="", help="a title line above the tracks")
    a = p.parse_args(argv)
    try:
        svg, stats = render(load_events(a.trace), a.width, a.title)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"trace_svg: {a.trace}: {e}", file=sys.stderr)
        return 2
    if a.out:
        with open(a.out, "w") as f:
            f.write(svg)
        print(f"trace_svg: {stats['tracks']} tracks, {stats['events']} events over "
              f"{stats['ms']:.1f} ms -> {a.out}", file=sys.stderr)
    else:
        sys.stdout.write(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
