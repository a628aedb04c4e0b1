#!/usr/bin/env python3
"""Writes the triage example's two ticket attachments (standard library only).

- examples/data/tickets/002-dented-bottle.png: a 160x120 drawing of a bottle with
  a dent near its base (an 8-bit RGB PNG).
- examples/data/tickets/020-partial-refund-dispute.pdf: a one-page post-office
  drop-off receipt (PDF 1.4, Helvetica text, no images).

The output is deterministic: running it again gives the same bytes.
Usage: python3 scripts/ticket-attachments.py
"""

import os
import struct
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TICKETS = os.path.join(ROOT, "examples", "data", "tickets")


def png(width, height, pixel):
    """An RGB PNG whose pixel (x, y) is pixel(x, y) -> (r, g, b)."""
    rows = b"".join(
        b"\x00" + b"".join(bytes(pixel(x, y)) for x in range(width))
        for y in range(height)
    )

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


def bottle(x, y):
    """A steel bottle on a wooden table, dented on its right side near the base."""
    table = (150, 110, 70)
    wall = (225, 228, 232)
    steel = (160, 170, 180)
    shade = (110, 120, 130)
    lid = (40, 45, 50)
    if y >= 104:
        return table if (x // 20 + y // 6) % 2 else (140, 100, 62)
    cx = 80
    half = 22
    if 10 <= y < 24:  # the lid
        return lid if abs(x - cx) <= 14 else wall
    if 24 <= y < 104:
        left, right = cx - half, cx + half
        if 80 <= y < 96:  # the dent pushes the right wall in by up to 9 px
            right -= 9 - abs(y - 88)
        if left <= x <= right:
            if 80 <= y < 96 and x >= right - 3:
                return shade
            return steel if x < cx + 8 else shade
    return wall


def pdf(lines):
    """A one-page PDF showing `lines` of text from the top left."""
    text = ["BT", "/F1 12 Tf", "16 TL", "56 760 Td"]
    for line in lines:
        escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        text.append(f"({escaped}) Tj T*")
    text.append("ET")
    stream = "\n".join(text).encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    ).encode()
    return out


RECEIPT = [
    "Example Postal Service - Drop-off receipt",
    "",
    "Date: 2026-03-09 14:32",
    "Branch: Example Lane, counter 2",
    "Service: Prepaid return label",
    "Addressee: Northwind Outfitters Returns",
    "Reference: NW-10209",
    "Tracking: EX 4471 9903 2218",
    "Parcels: 1    Weight: 1.42 kg",
    "",
    "Keep this receipt until the addressee confirms delivery.",
]


def main():
    with open(os.path.join(TICKETS, "002-dented-bottle.png"), "wb") as f:
        f.write(png(160, 120, bottle))
    with open(os.path.join(TICKETS, "020-partial-refund-dispute.pdf"), "wb") as f:
        f.write(pdf(RECEIPT))


if __name__ == "__main__":
    main()
