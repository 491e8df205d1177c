"""Confluent wire format (magic byte 0, 4-byte big-endian schema id, Avro body) with fastavro, for the hot paths.

The processor and sinks decode every record; confluent-kafka's AvroDeserializer costs ~48 µs per event here (it
re-evaluates data-contract rules per call) against ~12 µs for fastavro directly. The registry is still the source
of truth: writer schemas are fetched by id once and cached, and records are resolved into the project's current
reader schema, so data written with an older compatible version still decodes. Encoding goes through a writer
compiled from the schema, which writes fastavro's bytes and reuses those of ``FrozenRecord`` parts (the processor's
jobs and datasets recur in every run); anything it does not handle exactly like fastavro is left to fastavro.

Decoding problems raise ``WireFormatError`` with a machine-readable ``error_class`` (the DeadLetter's errorClass):
``empty-payload``, ``bad-magic-byte``, ``truncated``, ``unknown-schema-id``, ``incompatible-schema``,
``undecodable``, ``trailing-bytes``. A registry that cannot be reached is not the record's fault: that raises
``RegistryUnavailable`` so the caller retries instead of dead-lettering good data.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException

from kafka_lineage.schemas.avro_schemas import load_schema

MAGIC = 0
HEADER = struct.Struct(">bI")


class WireFormatError(ValueError):
    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


class RegistryUnavailable(RuntimeError):
    """The schema registry did not answer; retry later (the record itself may be fine)."""


class SchemaNotFound(LookupError):
    """The registry answered that it has no schema with this id."""


def split_frame(payload: bytes | None, body: bool = True) -> tuple[int, bytes]:
    """(schema id, Avro body) of a Confluent-framed payload; ``body=False``: (schema id, b"") without copying it."""
    if not payload:
        raise WireFormatError("empty-payload", "the record has no value")
    if payload[0] != MAGIC:
        raise WireFormatError("bad-magic-byte", f"first byte is {payload[0]:#04x}, not the Confluent magic byte 0x00"
                                                " (not Avro from a schema-registry serializer)")
    if len(payload) < HEADER.size:
        raise WireFormatError("truncated", f"{len(payload)} bytes is shorter than the 5-byte wire-format header")
    _, schema_id = HEADER.unpack_from(payload)
    return schema_id, payload[HEADER.size:] if body else b""


class AvroCodec:
    """Encode/decode one record type (``schemas/avro/<schema_name>.avsc``) in the Confluent wire format.

    ``fetch_schema(id)`` returns the schema text for a registry id; it raises ``SchemaNotFound`` for an unknown id
    and ``RegistryUnavailable`` when the registry cannot be reached.
    """

    def __init__(self, schema_name: str, fetch_schema: Callable[[int], str]) -> None:
        self.schema_name = schema_name
        self._reader = fastavro.parse_schema(load_schema(schema_name))
        self._fetch = fetch_schema
        self._writers: dict[int, Any] = {}
        self._compiled: tuple[Any, Writer | None] | None = None  # (schema, its plain writer or None)

    def _writer(self, schema_id: int) -> Any:
        writer = self._writers.get(schema_id)
        if writer is None:
            try:
                text = self._fetch(schema_id)
            except SchemaNotFound:
                raise WireFormatError("unknown-schema-id", f"schema id {schema_id} is not in the registry") from None
            try:
                writer = fastavro.parse_schema(json.loads(text))
            except (ValueError, SchemaParseException) as exc:
                raise WireFormatError("incompatible-schema", f"schema id {schema_id} is not Avro: {exc}") from None
            if writer == self._reader:
                # The usual case (the producer's schema is ours). fastavro compares writer and reader on every read
                # and skips resolution when they are equal; with the reader object itself that check is immediate
                # instead of a deep comparison of the whole schema (~10 µs per record).
                writer = self._reader
            self._writers[schema_id] = writer
        return writer

    def decode(self, payload: bytes | None) -> dict[str, Any]:
        schema_id, _ = split_frame(payload, body=False)
        writer = self._writer(schema_id)
        buffer = io.BytesIO(payload)  # read in place: slicing the body off would copy it
        buffer.seek(HEADER.size)
        size = len(payload) - HEADER.size
        try:
            record = fastavro.schemaless_reader(buffer, writer, self._reader)
        except fastavro.read.SchemaResolutionError as exc:
            raise WireFormatError("incompatible-schema", f"schema id {schema_id} cannot be read as "
                                                         f"{self.schema_name}: {exc}") from None
        except (EOFError, StopIteration, IndexError, struct.error):
            raise WireFormatError("truncated", f"the Avro body ends early ({size} bytes, schema id "
                                               f"{schema_id})") from None
        except (ValueError, TypeError, UnicodeDecodeError, OverflowError, MemoryError) as exc:
            raise WireFormatError("undecodable", f"not a valid {self.schema_name} record (schema id {schema_id}):"
                                                 f" {exc.__class__.__name__}: {exc}") from None
        if buffer.tell() != len(payload):
            raise WireFormatError("trailing-bytes", f"{len(payload) - buffer.tell()} bytes left after the record "
                                                    f"(schema id {schema_id})")
        return record

    def encode(self, record: dict[str, Any], schema_id: int) -> bytes:
        """``record`` written with this codec's schema, framed with ``schema_id`` (the id of that same schema).

        Plain records (dicts, lists, str, int, bool, bytes, None, ``(name, value)`` union hints) go through a writer
        compiled from the schema, which reuses the encoding of ``FrozenRecord`` parts (a job or dataset shared by
        many events); anything else through fastavro. Both write the same bytes.
        """
        if self._compiled is None or self._compiled[0] is not self._reader:  # (re)compiled for the current schema
            self._compiled = (self._reader, _compile_root(self._reader))
        plain = self._compiled[1]
        if plain is not None:
            out = bytearray(HEADER.pack(MAGIC, schema_id))
            try:
                plain(out, record)
            except Exception:  # _Unsupported, or bad data, which fastavro rejects in its own words
                pass
            else:
                return bytes(out)
        buffer = io.BytesIO()
        buffer.write(HEADER.pack(MAGIC, schema_id))
        fastavro.schemaless_writer(buffer, self._reader, record)
        return buffer.getvalue()


# --- encoding ------------------------------------------------------------------------------------------------------
class FrozenRecord(dict[str, Any]):
    """A record its creator never changes again (one shared by many outputs): its Avro encoding is kept on it."""

    __slots__ = ("encoded",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.encoded: dict[str, bytes] = {}  # record type's full name → the record's Avro bytes as that type


class _Unsupported(Exception):
    """Something the plain writer does not handle exactly like fastavro: fastavro writes the whole record."""


_VARINTS = [bytes([n]) if n < 0x80 else bytes([n & 0x7F | 0x80, n >> 7]) for n in range(1 << 14)]
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
Writer = Callable[[bytearray, Any], None]


def _varint(n: int) -> bytes:
    """An unsigned varint (the zig-zag one of a long, or of a length n // 2)."""
    if n < 1 << 14:
        return _VARINTS[n]
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _long(out: bytearray, value: int) -> None:
    """Avro's zig-zag varint."""
    out += _varint((value << 1) ^ (value >> 63))


def _string(out: bytearray, value: Any) -> None:
    if type(value) is not str:
        raise _Unsupported
    data = value.encode()  # UTF-8, as fastavro
    n = len(data) << 1  # the zig-zag of a length
    out += _VARINTS[n] if n < 1 << 14 else _varint(n)
    out += data


def _compile(schema: Any, named: dict[str, Any], done: dict[str, Writer]) -> Writer:
    """A writer of ``schema`` (parsed) that produces fastavro's bytes for the plain data the processor builds, and
    raises ``_Unsupported`` for anything else (other Python types, missing fields, types the processor never uses).
    """
    if isinstance(schema, str):
        if schema in done:  # a record type defined earlier (or being compiled: a recursive type)
            return done[schema]
        if schema in named:
            return _compile(named[schema], named, done)
        schema = {"type": schema}
    if isinstance(schema, list):
        return _union(schema, named, done)
    kind = schema["type"]
    if isinstance(kind, dict | list):
        return _compile(kind, named, done)
    logical = schema.get("logicalType")
    if kind == "string":
        return _string
    if kind == "null":
        def null(out: bytearray, value: Any) -> None:
            if value is not None:
                raise _Unsupported
        return null
    if kind == "boolean":
        def boolean(out: bytearray, value: Any) -> None:
            if type(value) is not bool:
                raise _Unsupported
            out.append(value)
        return boolean
    if kind in ("int", "long") and logical in (None, "timestamp-millis"):  # ints pass timestamp-millis unchanged
        low, high = _INT32 if kind == "int" else _INT64

        def integer(out: bytearray, value: Any) -> None:
            if type(value) is not int or not low <= value <= high:
                raise _Unsupported
            _long(out, value)
        return integer
    if kind == "bytes" and logical is None:
        def raw(out: bytearray, value: Any) -> None:
            if type(value) is not bytes:
                raise _Unsupported
            _long(out, len(value))
            out += value
        return raw
    if kind == "enum":
        indexes = {symbol: index for index, symbol in enumerate(schema["symbols"])}

        def enum(out: bytearray, value: Any) -> None:
            index = indexes.get(value) if type(value) is str else None
            if index is None:
                raise _Unsupported
            _long(out, index)
        return enum
    if kind == "array":
        item = _compile(schema["items"], named, done)

        def array(out: bytearray, value: Any) -> None:
            if type(value) is not list:
                raise _Unsupported
            if value:
                _long(out, len(value))
                for element in value:
                    item(out, element)
            out.append(0)
        return array
    if kind == "map":
        entry = _compile(schema["values"], named, done)

        def mapping(out: bytearray, value: Any) -> None:
            if type(value) is not dict:
                raise _Unsupported
            if value:
                _long(out, len(value))
                for key, element in value.items():
                    _string(out, key)
                    entry(out, element)
            out.append(0)
        return mapping
    if kind == "record":
        return _record(schema, named, done)
    raise _Unsupported  # float, double, fixed, other logical types: fastavro's


def _record(schema: dict[str, Any], named: dict[str, Any], done: dict[str, Writer]) -> Writer:
    name = schema["name"]
    fields: list[tuple[str, Writer, bool, Any]] = []  # (name, writer, may be missing, value if missing)

    def record(out: bytearray, value: Any) -> None:
        if type(value) is FrozenRecord:
            data = value.encoded.get(name)
            if data is None:
                data = value.encoded[name] = _bytes(plain, value)
            out += data
        elif type(value) is dict:
            plain(out, value)
        else:
            raise _Unsupported

    def plain(out: bytearray, value: dict[str, Any]) -> None:
        for key, write, optional, default in fields:
            if key in value:
                write(out, value[key])
            elif optional:
                write(out, default)
            else:
                raise _Unsupported  # fastavro's error

    done[name] = record  # before the fields: a recursive type refers to itself
    # A missing field is written as fastavro writes it: its default, or null if its type has null.
    fields += [(field["name"], _compile(field["type"], named, done),
                "default" in field or "null" in field["type"], field.get("default")) for field in schema["fields"]]
    return record


def _union(branches: list[Any], named: dict[str, Any], done: dict[str, Writer]) -> Writer:
    """``["null", T]``: None → null, a value → T; a ``(name, value)`` hint → that branch (fastavro's tuple notation).
    fastavro picks the first branch the value validates against, which for these unions is the same."""
    names = [branch if isinstance(branch, str) else branch.get("name", branch["type"]) for branch in branches]
    writers = [_compile(branch, named, done) for branch in branches]
    if len(branches) != 2 or names[0] != "null" or names[1] == "null":
        raise _Unsupported
    other = writers[1]

    def union(out: bytearray, value: Any) -> None:
        if value is None:
            out.append(0)
        elif type(value) is tuple:
            if len(value) != 2 or value[0] != names[1]:
                raise _Unsupported
            out.append(2)  # zig-zag 1
            other(out, value[1])
        else:
            out.append(2)
            other(out, value)
    return union


def _bytes(write: Writer, value: Any) -> bytes:
    out = bytearray()
    write(out, value)
    return bytes(out)


def _compile_root(schema: dict[str, Any]) -> Writer | None:
    """The plain writer of a parsed schema; None if the schema has types it leaves to fastavro."""
    try:
        return _compile(schema, schema.get("__named_schemas", {}), {})
    except _Unsupported:
        return None
