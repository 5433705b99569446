"""The top-level documents of a save archive (`manifest.json`, `index.json`), read from its tar headers as Go's
archive/tar reads them (what skopeo reads the archive with: go/src/archive/tar/reader.go, format.go, strconv.go) and
bounded whatever this machine's Python is: Python's `tarfile` is never given a stranger's archive (CPython's
CVE-2025-8194, a negative member size that loops forever, and CVE-2024-6232, a PAX header that takes quadratic time,
are fixed only in its newer releases).

Only what picks the image to convert is read here (which transport, which of several images); the archive's layers
are read by skopeo and umoci, confined (`confined`), never by this module.

- A header is 512 bytes; its checksum is checked (unsigned or signed, as Go accepts either); an all-zero block ends
  the archive.
- Sizes are octal, or base-256 where the first byte's high bit is set (Go's `parseNumeric`); a negative size, one
  that is not a number, or one that runs past the end of the file is an error, never a loop.
- A name is the USTAR prefix and name, replaced by a GNU long name (`L`) or a PAX `path` record (`x`); a PAX or GNU
  record is at most `MAX_SPECIAL` bytes (Go's `maxSpecialFileSize`), and a file at most `MAX_HEADERS` headers.
"""

from __future__ import annotations

import os
from collections.abc import Collection

BLOCK = 512
MAX_SPECIAL = 1 << 20
"""The most bytes of a PAX or GNU long-name record (Go's archive/tar `maxSpecialFileSize`)."""
MAX_HEADERS = 200_000
"""The most headers read from one archive before it is refused."""


class TarError(ValueError):
    """An archive these readers refuse, and why."""


def documents(fd: int, names: Collection[str], limit: int) -> dict[str, bytes]:
    """The regular files named `names` (at the archive's top, `./` or not) in the tar file `fd` (a regular file: read
    with pread, never followed past its end), each at most `limit` bytes (a larger one is left out); the first of
    each name. `TarError` for an archive Go's reader refuses or one past `MAX_HEADERS`."""
    end = os.fstat(fd).st_size
    found: dict[str, bytes] = {}
    offset, long_name, count = 0, None, 0
    while offset + BLOCK <= end:
        count += 1
        if count > MAX_HEADERS:
            raise TarError(f"more than {MAX_HEADERS} entries")
        header = os.pread(fd, BLOCK, offset)
        if header == bytes(BLOCK):
            return found
        _checksum(header, offset)
        size = _number(header[124:136], offset, "size")
        data = offset + BLOCK
        if size > end - data:
            raise TarError(f"the entry at byte {offset} runs past the end of the file")
        flag = header[156:157]
        if flag in (b"x", b"L"):
            if size > MAX_SPECIAL:
                raise TarError(f"the entry at byte {offset} has a {size}-byte header record (at most {MAX_SPECIAL})")
            record = os.pread(fd, size, data)
            long_name = _pax_path(record, offset) if flag == b"x" else _cstring(record)
        elif flag not in (b"g", b"K"):
            name = long_name if long_name is not None else _ustar_name(header)
            long_name = None
            key = name[2:] if name.startswith("./") else name
            if flag in (b"0", b"\0", b"7") and key in names and key not in found and size <= limit:
                found[key] = os.pread(fd, size, data)
        offset = data + (size + BLOCK - 1) // BLOCK * BLOCK
    raise TarError("it ends without the two zero blocks a tar file ends with")


def is_tar(head: bytes) -> bool:
    """Whether the first block of a file is a USTAR, PAX or GNU tar header (its magic), as `docker save` writes."""
    return len(head) >= BLOCK and head[257:263] in (b"ustar\0", b"ustar ")


def _checksum(header: bytes, offset: int) -> None:
    blanked = header[:148] + b" " * 8 + header[156:]
    unsigned = sum(blanked)
    signed = sum(b - 256 if b > 127 else b for b in blanked)
    if _number(header[148:156], offset, "checksum") not in (unsigned, signed):
        raise TarError(f"the header at byte {offset} fails its checksum")


def _number(field: bytes, offset: int, what: str) -> int:
    if field[:1] and field[0] & 0x80:  # base-256 (GNU): a negative one has its sign bit set too
        if field[0] & 0x40:
            raise TarError(f"the header at byte {offset} has a negative {what}")
        return int.from_bytes(bytes([field[0] & 0x7F]) + field[1:], "big")
    text = field.replace(b"\0", b" ").strip()
    if not text:
        return 0
    if not all(48 <= b <= 55 for b in text):
        raise TarError(f"the header at byte {offset} has a {what} that is not an octal number ({text[:16]!r})")
    return int(text, 8)


def _cstring(data: bytes) -> str:
    return data.split(b"\0", 1)[0].decode("utf-8", "replace")


def _ustar_name(header: bytes) -> str:
    name = _cstring(header[0:100])
    if header[257:263] == b"ustar\0" and (prefix := _cstring(header[345:500])):
        return f"{prefix}/{name}"
    return name


def _pax_path(record: bytes, offset: int) -> str | None:
    """The `path` of a PAX extended header (records `LENGTH key=value\\n`), or None."""
    path, at = None, 0
    while at < len(record):
        space = record.find(b" ", at, at + 20)
        length = record[at:space]
        if space < 0 or not length.isdigit() or int(length) <= space - at or at + int(length) > len(record):
            raise TarError(f"the PAX header at byte {offset} is malformed")
        line = record[space + 1 : at + int(length)]
        if not line.endswith(b"\n") or b"=" not in line:
            raise TarError(f"the PAX header at byte {offset} is malformed")
        key, _, value = line[:-1].partition(b"=")
        if key == b"path":
            path = value.decode("utf-8", "replace")
        at += int(length)
    return path
