"""Where a text file may be cut into blocks: record starts found in its raw bytes.

One pass over the bytes (numpy, chunk by chunk) finds, for each nominal boundary, the first record
start at or after it: the byte after a newline that lies outside double quotes (CSV, RFC 4180:
quotes inside fields are doubled, so their count keeps its parity), and counts the lines before
it, so rejects keep file line numbers. Pure: a file's bytes in, offsets out.
"""

from __future__ import annotations

import os

import numpy as np

from lakehouse import storage

SCAN_CHUNK = 16 << 20
"""Bytes read and scanned at a time."""
NL, CR, QUOTE, COMMA = 10, 13, 34, 44
"""The bytes of a newline, a carriage return, a double quote and a comma."""


def record_starts(path: str, data_start: int, size: int, block_size: int,
                  quoted: bool, max_record: int | None = None) -> list[tuple[int, int]] | None:
    """(byte offset, file line) of the first record start at or after each nominal boundary
    ``data_start + k * block_size`` (k >= 1), without duplicates; a record start is the byte after
    a newline (outside double quotes when ``quoted``).

    Quote parity tells inside from outside only under RFC 4180 quoting. Python's csv reader also
    accepts a quote inside an unquoted field (``5" screen``) as a literal character, which flips
    the parity; so when ``quoted`` and any quote before the last boundary is not where RFC 4180
    puts one (see ``quotes_follow_rfc4180``), or a lone CR (after which the reader drops the rest
    of the line, quotes included), or a line longer than ``max_record`` (which the reader skips,
    quotes included) comes before the last boundary, this returns None: the file is not split."""
    wanted = list(range(data_start + block_size, size, block_size))
    out: list[tuple[int, int]] = []
    if not wanted:
        return out
    with storage.open_read(path) as f:
        f.seek(data_start)
        newlines_before = 1 if data_start else 0  # newlines in [0, chunk start): the header's
        quotes_before = 0
        before = -1
        last_nl = data_start - 1  # the newline that ends the line before the data
        w = 0
        lo = data_start
        while w < len(wanted):
            chunk = np.frombuffer(f.read(SCAN_CHUNK), dtype=np.uint8)
            if not len(chunk):
                break
            peek = f.read(1)
            if peek:
                f.seek(-1, os.SEEK_CUR)
            nl = np.flatnonzero(chunk == NL)
            if quoted:
                q = np.flatnonzero(chunk == QUOTE)
                after = peek[0] if peek else -1
                if not quotes_follow_rfc4180(chunk, q, before, after, quotes_before):
                    return None
                cr = np.flatnonzero(chunk == CR)
                if len(cr):
                    nxt = np.where(cr + 1 < len(chunk), chunk[np.minimum(cr + 1, len(chunk) - 1)], after)
                    if np.any(nxt != NL):
                        return None
                if max_record is not None:
                    ends = np.append(nl + lo, lo + len(chunk))  # the open line so far counts too
                    if len(ends) and np.max(np.diff(np.insert(ends, 0, last_nl))) - 1 > max_record:
                        return None
                    if len(nl):
                        last_nl = int(nl[-1]) + lo
                outside = ((quotes_before + np.searchsorted(q, nl)) % 2) == 0
                quotes_before += len(q)
                candidates = np.flatnonzero(outside)  # indexes into nl
            else:
                candidates = np.arange(len(nl))
            before = int(chunk[-1])
            cand_pos = nl[candidates] + lo
            while w < len(wanted):
                # the record start p must satisfy p >= wanted[w], i.e. its newline at >= wanted[w] - 1
                k = int(np.searchsorted(cand_pos, wanted[w] - 1))
                if k == len(cand_pos):
                    break  # not in this chunk
                p = int(cand_pos[k]) + 1
                line = newlines_before + int(candidates[k]) + 1 + 1
                if p < size and (not out or p > out[-1][0]) and p > data_start:
                    out.append((p, line))
                while w < len(wanted) and wanted[w] <= p:
                    w += 1
            newlines_before += len(nl)
            lo += len(chunk)
    return out


def longest_line(buf: np.ndarray) -> int:
    """The longest line of ``buf`` in bytes, its newline not counted."""
    nl = np.flatnonzero(buf == NL)
    ends = np.append(nl, len(buf))
    starts = np.insert(nl + 1, 0, 0)
    return int(np.max(ends - starts)) if len(ends) else 0


def quotes_follow_rfc4180(buf: np.ndarray, q: np.ndarray, before: int, after: int, parity: int) -> bool:
    """True when every double quote in ``buf`` (positions ``q``) sits where RFC 4180 puts one,
    counting ``parity`` quotes before ``buf``: an opening quote (even count) at the start of a
    field (after a comma, a newline, or the start) or right after a quote (an escaped ``""``); a
    closing quote (odd count) before a comma, CR, newline, the end, or a quote. Under that rule
    quote parity tells exactly where Python's csv reader is inside a quoted field. ``before`` and
    ``after`` are the bytes around ``buf`` (-1: the start or the end of the data)."""
    if not len(q):
        return True
    n = len(buf)
    prev = np.where(q > 0, buf[np.maximum(q - 1, 0)].astype(np.int16), before)
    nxt = np.where(q + 1 < n, buf[np.minimum(q + 1, n - 1)].astype(np.int16), after)
    opening = ((parity + np.arange(len(q))) % 2) == 0
    ok_open = np.isin(prev, (COMMA, NL, QUOTE, -1))
    ok_close = np.isin(nxt, (COMMA, NL, CR, QUOTE, -1))
    return bool(np.all(np.where(opening, ok_open, ok_close)))
