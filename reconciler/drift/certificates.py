"""When a cluster's client and CA certificates expire (issue 45), pure.

A cluster's `config` may name certificates in four librdkafka settings (`CERTIFICATE_SETTINGS`): two files
(`ssl.certificate.location`, `ssl.ca.location`) and two PEM texts (`ssl.certificate.pem`, `ssl.ca.pem`); each may
hold several certificates (a chain, a CA bundle). The edge (`reconciler.operations.observe`, `read_certificates`)
resolves the cluster's settings through the one path (`topology/connection.py` `client_config`), reads the files
and hands over a `CertificateSource` per setting: its bytes, or why they could not be had. `check` turns one into a
`CertificateCheck` against the topology's `slo.certificate_expiry_days` and the command's one "now": the earliest
expiry of the certificates in it counts. The report (`drift/report/clusters.py`) makes the items: expired or
expiring is drift, unreadable a note naming the setting (never the content).

The certificates are parsed with the standard library alone: PEM is base64 of DER, and the expiry is one field
at a fixed place of the DER structure (RFC 5280: Certificate / tbsCertificate / validity / notAfter), read by
the small DER walk below; nothing else of a certificate is interpreted but its subject's common name.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import enum
import re
from dataclasses import dataclass

#: The librdkafka settings that hold certificates, files first.
CERTIFICATE_SETTINGS: tuple[str, ...] = (
    "ssl.certificate.location",
    "ssl.ca.location",
    "ssl.certificate.pem",
    "ssl.ca.pem",
)
#: The settings whose value is a file's path (the others hold the PEM text itself).
FILE_SETTINGS: frozenset[str] = frozenset({"ssl.certificate.location", "ssl.ca.location"})

DAY_SECONDS = 86_400
_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", re.DOTALL)
_CN = bytes([0x55, 0x04, 0x03])  # OID 2.5.4.3, commonName
_SEQUENCE, _UTC_TIME, _GENERALIZED_TIME, _EXPLICIT_0 = 0x30, 0x17, 0x18, 0xA0


class CertificateError(ValueError):
    """The bytes are no PEM certificate the report can read; the message never quotes them."""


@dataclass(frozen=True)
class Certificate:
    subject: str  # the subject's common name ('' when it has none)
    not_after_ms: int  # notAfter, Unix milliseconds


@dataclass(frozen=True)
class CertificateSource:
    """What the edge read for one certificate setting of a cluster: the bytes, or why there are none."""

    cluster: str
    setting: str  # one of CERTIFICATE_SETTINGS
    shown: str = ""  # what the report may name: the topology's value of a file setting (unresolved); '' for PEM text
    data: bytes | None = None
    error: str | None = None  # why it could not be read (an OS error's words, an unresolved reference)


class Expiry(str, enum.Enum):
    OK = "ok"
    EXPIRING = "expiring"  # within slo.certificate_expiry_days
    EXPIRED = "expired"
    UNREADABLE = "unreadable"


@dataclass(frozen=True)
class CertificateCheck:
    cluster: str
    setting: str
    shown: str
    state: Expiry
    certificates: int = 0  # how many the setting holds
    subject: str | None = None  # the common name of the one that expires first
    not_after_ms: int | None = None  # the earliest expiry
    seconds_left: float | None = None  # to the earliest expiry; negative once expired
    window_days: int = 0
    problem: str | None = None  # why it is unreadable

    @property
    def not_after_iso(self) -> str | None:
        if self.not_after_ms is None:
            return None
        return dt.datetime.fromtimestamp(self.not_after_ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    @property
    def days_left(self) -> int | None:
        """Whole days to the earliest expiry (negative: days since it expired)."""
        if self.seconds_left is None:
            return None
        return int(self.seconds_left / DAY_SECONDS)  # toward zero

    def to_dict(self) -> dict:
        return {
            "setting": self.setting,
            "location": self.shown or None,
            "state": self.state.value,
            "certificates": self.certificates,
            "subject": self.subject,
            "not_after": self.not_after_iso,
            "seconds_left": None if self.seconds_left is None else round(self.seconds_left, 3),
            "days_left": self.days_left,
            "window_days": self.window_days,
            "problem": self.problem,
        }


# --- DER ------------------------------------------------------------------------------------------------


def _tlv(der: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """(tag, start of the contents, end of the contents) of the element at `pos`."""
    if pos + 2 > end:
        raise CertificateError("truncated certificate")
    tag, length = der[pos], der[pos + 1]
    pos += 2
    if length & 0x80:
        n = length & 0x7F
        if not 1 <= n <= 4 or pos + n > end:
            raise CertificateError("malformed certificate (length)")
        length = int.from_bytes(der[pos : pos + n], "big")
        pos += n
    if pos + length > end:
        raise CertificateError("truncated certificate")
    return tag, pos, pos + length


def _children(der: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    out, pos = [], start
    while pos < end:
        tag, s, e = _tlv(der, pos, end)
        out.append((tag, s, e))
        pos = e
    return out


def _time(tag: int, value: bytes) -> int:
    try:
        text = value.decode("ascii")
        if tag == _UTC_TIME:  # YYMMDDHHMMSSZ; RFC 5280: 50-99 are 19xx
            when = dt.datetime.strptime(text, "%y%m%d%H%M%SZ")
            if when.year >= 2050:
                when = when.replace(year=when.year - 100)
        elif tag == _GENERALIZED_TIME:  # YYYYMMDDHHMMSSZ
            when = dt.datetime.strptime(text, "%Y%m%d%H%M%SZ")
        else:
            raise CertificateError("malformed certificate (validity)")
    except CertificateError:
        raise
    except ValueError:  # UnicodeDecodeError is one
        raise CertificateError("malformed certificate (validity time)") from None
    return int(when.replace(tzinfo=dt.UTC).timestamp() * 1000)


def _common_name(der: bytes, start: int, end: int) -> str:
    for _, rs, re_ in _children(der, start, end):  # RelativeDistinguishedName (SET)
        for _, as_, ae in _children(der, rs, re_):  # AttributeTypeAndValue (SEQUENCE)
            parts = _children(der, as_, ae)
            if len(parts) == 2 and der[parts[0][1] : parts[0][2]] == _CN:
                return der[parts[1][1] : parts[1][2]].decode("utf-8", "replace")
    return ""


def parse_der(der: bytes) -> Certificate:
    """The expiry and common name of one DER certificate (CertificateError when it is none)."""
    tag, start, end = _tlv(der, 0, len(der))
    if tag != _SEQUENCE:
        raise CertificateError("not a certificate")
    tag, start, end = _tlv(der, start, end)  # tbsCertificate
    if tag != _SEQUENCE:
        raise CertificateError("not a certificate")
    fields = _children(der, start, end)
    if fields and fields[0][0] == _EXPLICIT_0:  # version
        fields = fields[1:]
    if len(fields) < 5 or fields[3][0] != _SEQUENCE or fields[4][0] != _SEQUENCE:  # serial, alg, issuer, validity
        raise CertificateError("not a certificate")
    validity = _children(der, fields[3][1], fields[3][2])
    if len(validity) != 2:
        raise CertificateError("malformed certificate (validity)")
    tag, s, e = validity[1]
    return Certificate(_common_name(der, fields[4][1], fields[4][2]), _time(tag, der[s:e]))


def parse_pem(data: bytes) -> tuple[Certificate, ...]:
    """Every certificate of a PEM text (a chain, a bundle); CertificateError if there is none or one is broken."""
    blocks = _PEM.findall(data)
    if not blocks:
        raise CertificateError("no PEM certificate in it")
    out = []
    for block in blocks:
        try:
            der = base64.b64decode(b"".join(block.split()), validate=True)
        except (binascii.Error, ValueError):
            raise CertificateError("a PEM certificate in it is not valid base64") from None
        out.append(parse_der(der))
    return tuple(out)


def check(source: CertificateSource, now_ms: int, window_days: int) -> CertificateCheck:
    """Expired, expiring within `window_days`, fine, or unreadable: the earliest expiry of the setting's certificates
    counts."""

    def unreadable(problem: str) -> CertificateCheck:
        return CertificateCheck(
            source.cluster, source.setting, source.shown, Expiry.UNREADABLE, window_days=window_days, problem=problem
        )

    if source.data is None:
        return unreadable(source.error or "not read")
    try:
        certs = parse_pem(source.data)
    except CertificateError as exc:
        return unreadable(str(exc))
    first = min(certs, key=lambda c: c.not_after_ms)
    left = (first.not_after_ms - now_ms) / 1000
    state = Expiry.EXPIRED if left <= 0 else Expiry.EXPIRING if left < window_days * DAY_SECONDS else Expiry.OK
    return CertificateCheck(
        source.cluster,
        source.setting,
        source.shown,
        state,
        certificates=len(certs),
        subject=first.subject,
        not_after_ms=first.not_after_ms,
        seconds_left=left,
        window_days=window_days,
    )
