"""A small PNG rasteriser for the benchmark charts: lines, points, a 5x7 font, zlib.

Why not a plotting library: the benchmarks run where only the core install and the test tools
are; one chart per run does not justify matplotlib's weight. The charts are line plots with
axes, ticks and a legend, and nothing more is needed.
"""

from __future__ import annotations

import itertools
import struct
import zlib
from pathlib import Path

# A 5x7 bitmap font (digits, capitals, a few signs): enough for axis labels and legends.
_FONT = {
    "0": ".###.#...##..###.#.###..##...#.###.",
    "1": "..#...##....#....#....#....#...###.",
    "2": ".###.#...#....#...#...#...#...#####",
    "3": "#####...#...#.....#.....##...#.###.",
    "4": "...#...##..#.#.#..#.#####...#....#.",
    "5": "######....####.....#....##...#.###.",
    "6": "..##..#...#....####.#...##...#.###.",
    "7": "#####....#...#...#...#....#....#...",
    "8": ".###.#...##...#.###.#...##...#.###.",
    "9": ".###.#...##...#.####....#...#..##..",
    "A": ".###.#...##...#######...##...##...#",
    "B": "####.#...##...#####.#...##...#####.",
    "C": ".###.#...##....#....#....#...#.###.",
    "D": "###..#..#.#...##...##...##..#.###..",
    "E": "######....#....####.#....#....#####",
    "F": "######....#....####.#....#....#....",
    "G": ".###.#...##....#.####...##...#.####",
    "H": "#...##...##...#######...##...##...#",
    "I": ".###...#....#....#....#....#...###.",
    "J": "..###...#....#....#....#.#..#..##..",
    "K": "#...##..#.#.#..##...#.#..#..#.#...#",
    "L": "#....#....#....#....#....#....#####",
    "M": "#...###.###.#.##.#.##...##...##...#",
    "N": "#...##...###..##.#.##..###...##...#",
    "O": ".###.#...##...##...##...##...#.###.",
    "P": "####.#...##...#####.#....#....#....",
    "Q": ".###.#...##...##...##.#.##..#..##.#",
    "R": "####.#...##...#####.#.#..#..#.#...#",
    "S": ".#####....#.....###.....#....#####.",
    "T": "#####..#....#....#....#....#....#..",
    "U": "#...##...##...##...##...##...#.###.",
    "V": "#...##...##...##...##...#.#.#...#..",
    "W": "#...##...##...##.#.##.#.##.#.#.#.#.",
    "X": "#...##...#.#.#...#...#.#.#...##...#",
    "Y": "#...##...#.#.#...#....#....#....#..",
    "Z": "#####....#...#...#...#...#....#####",
    ".": "..........................##...##..",
    "-": "...............#####...............",
    "_": "..............................#####",
    "/": "....#....#...#...#...#...#....#....",
    ":": "......##...##........##...##.......",
    "%": "##...##..#...#...#...#...#..##...##",
    "(": "...#...#...#....#....#.....#.....#.",
    ")": ".#.....#.....#....#....#...#...#...",
    "+": ".......#....#..#####..#....#.......",
    "=": "..........#####.....#####..........",
    " ": "...................................",
    "x": "..........#...#.#.#...#...#.#.#...#",
}


class Canvas:
    """An RGB raster with lines, rectangles and text; ``png()`` encodes it (zlib, stdlib only)."""

    def __init__(self, w: int, h: int):
        self.w, self.h = w, h
        self.px = bytearray(b"\xff" * (w * h * 3))

    def dot(self, x: int, y: int, c: tuple[int, int, int]) -> None:
        if 0 <= x < self.w and 0 <= y < self.h:
            i = (y * self.w + x) * 3
            self.px[i : i + 3] = bytes(c)

    def rect(self, x0: int, y0: int, x1: int, y1: int, c: tuple[int, int, int]) -> None:
        for y in range(max(0, min(y0, y1)), min(self.h, max(y0, y1) + 1)):
            for x in range(max(0, min(x0, x1)), min(self.w, max(x0, x1) + 1)):
                i = (y * self.w + x) * 3
                self.px[i : i + 3] = bytes(c)

    def line(self, x0: int, y0: int, x1: int, y1: int, c: tuple[int, int, int], width: int = 1) -> None:
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        while True:
            for k in range(width):
                self.dot(x0, y0 + k, c)
                self.dot(x0 + k, y0, c)
            if x0 == x1 and y0 == y1:
                break
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x: int, y: int, s: str, c: tuple[int, int, int] = (0, 0, 0), scale: int = 1) -> int:
        for ch in s.upper():
            g = _FONT.get(ch, _FONT["."])
            for row in range(7):
                for col in range(5):
                    if g[row * 5 + col] == "#":
                        for a in range(scale):
                            for b in range(scale):
                                self.dot(x + col * scale + a, y + row * scale + b, c)
            x += 6 * scale
        return x

    def png(self) -> bytes:
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3 : (y + 1) * self.w * 3]) for y in range(self.h))

        def chunk(tag: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6))
            + chunk(b"IEND", b"")
        )


COLORS = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (148, 103, 189), (255, 127, 14)]


def png_chart(
    path: Path,
    title: str,
    series: dict[str, list[tuple[float, float]]],
    xlabel: str,
    ylabel: str,
    w: int = 640,
    h: int = 400,
    canvas: Canvas | None = None,
    ox: int = 0,
    oy: int = 0,
    logy: bool = False,
) -> Canvas:
    """A line chart (points joined in x order) with axes, ticks and a legend; ``logy``: log10 y axis."""
    import math

    cv = canvas or Canvas(w, h)
    left, right, top, bottom = ox + 60, ox + w - 20, oy + 34, oy + h - 44
    xs = [x for pts in series.values() for x, _ in pts] or [0.0, 1.0]
    ys = [y for pts in series.values() for _, y in pts] or [0.0, 1.0]
    x0, x1 = min(0.0, min(xs)), max(xs) * 1.05 or 1.0
    y0: float
    y1: float
    if logy:
        pos = [y for y in ys if y > 0] or [1.0]
        y0, y1 = float(math.floor(math.log10(min(pos)))), float(math.ceil(math.log10(max(pos)) + 0.01))
    else:
        y0, y1 = 0.0, max(ys) * 1.15 or 1.0

    def X(x: float) -> int:
        return int(left + (x - x0) / (x1 - x0) * (right - left))

    def Y(y: float) -> int:
        v = math.log10(max(y, 1e-9)) if logy else y
        return int(bottom - (v - y0) / (y1 - y0) * (bottom - top))

    cv.text(ox + 10, oy + 8, title, scale=2)
    cv.line(left, bottom, right, bottom, (0, 0, 0))
    cv.line(left, top, left, bottom, (0, 0, 0))
    yticks = [10.0**e for e in range(int(y0), int(y1) + 1)] if logy else [y0 + (y1 - y0) * k / 4 for k in range(5)]
    for yv in yticks:
        cv.line(left - 4, Y(yv), left, Y(yv), (0, 0, 0))
        cv.line(left + 1, Y(yv), right, Y(yv), (225, 225, 225))
        cv.text(ox + 4, Y(yv) - 3, _num(yv))
    for k in range(5):
        xv = x0 + (x1 - x0) * k / 4
        cv.line(X(xv), bottom, X(xv), bottom + 4, (0, 0, 0))
        cv.text(X(xv) - 10, bottom + 8, _num(xv))
    cv.text(left + (right - left) // 2 - 3 * len(xlabel), bottom + 22, xlabel)
    cv.text(ox + 4, top - 12, ylabel)
    for i, (name, pts) in enumerate(series.items()):
        col = COLORS[i % len(COLORS)]
        pts = sorted(pts)
        for (a, b), (c, d) in itertools.pairwise(pts):
            cv.line(X(a), Y(b), X(c), Y(d), col, 2)
        for a, b in pts:
            cv.rect(X(a) - 3, Y(b) - 3, X(a) + 3, Y(b) + 3, col)
        cv.rect(right - 150, top + 4 + i * 12, right - 142, top + 10 + i * 12, col)
        cv.text(right - 138, top + 4 + i * 12, name)
    if canvas is None:
        path.write_bytes(cv.png())
    return cv


def _num(v: float) -> str:
    if v >= 1000:
        return f"{v / 1000:.1f}K".replace(".0K", "K")
    if v >= 10 or v == 0:
        return f"{v:.0f}"
    if v >= 1:
        return f"{v:.1f}"
    return f"{v:.3f}".rstrip("0") if v >= 0.001 else f"{v:.0e}"
