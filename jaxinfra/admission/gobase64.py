"""A []byte field as the API server decodes it: standard base64, checked byte by byte as Go checks it.

Go's encoding/json reads a JSON string into a []byte field (a ConfigMap's binaryData values, a Secret's data values, a
webhook's caBundle) with encoding/base64's StdEncoding: the alphabet A-Z a-z 0-9 + /, padded with '=' to a multiple of
four characters, '\\r' and '\\n' skipped anywhere, bits past the last byte ignored (the encoding is not Strict). Any
other string is a decoding error, "illegal base64 data at input byte N", N the offset of the first byte that cannot be
read, and the API server refuses the whole object before admission or validation (400 BadRequest, `ConfigMap in version
"v1" cannot be handled as a ConfigMap: illegal base64 data at input byte 3`), where kubectl shows it after `Error from
server (BadRequest): error when creating "FILE": `.

Emulated from golang/go @10a01cd69af6 src/encoding/base64/base64.go (Decode, decodeQuantum: which offset each error
names; CorruptInputError's text), as kubernetes/kubernetes @046d201c45ce
vendor/sigs.k8s.io/json/internal/golang/encoding/json/decode.go (literalStore: a JSON string into a []byte is
`base64.StdEncoding.Decode`, the error saved as the decoding's) calls it. Offsets count the UTF-8 bytes of the string.
"""

from __future__ import annotations

_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_VALUE = {byte: i for i, byte in enumerate(_ALPHABET)}
_PAD = ord("=")
_NEWLINES = frozenset(b"\r\n")


class IllegalBase64(ValueError):
    """encoding/base64's CorruptInputError: the offset of the first byte that cannot be read."""

    def __init__(self, offset: int) -> None:
        self.offset = offset
        super().__init__(f"illegal base64 data at input byte {offset}")


def decode(text: str) -> bytes:
    """The bytes a standard base64 string holds, as base64.StdEncoding.Decode reads them; `IllegalBase64` where Go
    refuses it."""
    src = text.encode("utf-8", "surrogatepass")
    out = bytearray()
    at = 0
    while at < len(src):
        at, chunk = _quantum(src, at)
        out += chunk
    return bytes(out)


def _quantum(src: bytes, at: int) -> tuple[int, bytes]:
    """decodeQuantum: up to four characters from `at` (line breaks skipped) into up to three bytes; where it stopped."""
    digits = [0, 0, 0, 0]
    count = 0
    while count < 4:
        if at == len(src):
            if count == 0:
                return at, b""
            raise IllegalBase64(at - count)  # a partial quantum: StdEncoding wants its padding
        byte = src[at]
        at += 1
        if byte in _VALUE:
            digits[count] = _VALUE[byte]
            count += 1
            continue
        if byte in _NEWLINES:
            continue
        if byte != _PAD or count < 2:  # not of the alphabet, or padding where no byte has been read yet
            raise IllegalBase64(at - 1)
        if count == 2:  # "==" is due: the first '=' is read
            while at < len(src) and src[at] in _NEWLINES:
                at += 1
            if at == len(src):
                raise IllegalBase64(len(src))
            if src[at] != _PAD:
                raise IllegalBase64(at - 1)
            at += 1
        while at < len(src) and src[at] in _NEWLINES:
            at += 1
        if at < len(src):  # anything after the padding
            raise IllegalBase64(at)
        break
    value = digits[0] << 18 | digits[1] << 12 | digits[2] << 6 | digits[3]
    return at, value.to_bytes(3, "big")[: count - 1]


def illegal_at(text: str) -> int | None:
    """The offset Go's decoder names for `text` ("illegal base64 data at input byte N"), None when it decodes."""
    try:
        decode(text)
    except IllegalBase64 as err:
        return err.offset
    return None
