"""Raw ROS 2 topics to a rosbag2 MCAP bag directory, readable by ``mcap``, ``rosbags`` and Foxglove.

A bag is a directory holding ``<name>_0.mcap`` and, after :meth:`McapBagWriter.close`,
``metadata.yaml`` -- the layout ``ros2 bag record -s mcap`` produces. The MCAP file carries what
rosbag2's MCAP storage plugin writes: profile ``ros2``, one ``ros2msg`` schema per message type
holding the full message definition (the top ``.msg`` text, then each nested type after a line of
80 ``=`` and ``MSG: pkg/msg/Type``), channels with message encoding ``cdr`` and the metadata keys
``offered_qos_profiles`` / ``topic_type_hash``, and a ``rosbag2`` metadata record holding the
serialized bag info and ``ROS_DISTRO``.

Crash safety: messages are written in zstd-compressed chunks of about ``chunk_size`` bytes to an
unbuffered file, so each completed chunk reaches the operating system when it is finalized. After
a SIGKILL the file has no summary section and no footer, but a streaming reader
(:func:`read_raw_messages`, or ``mcap.reader.NonSeekingReader``) reads every completed chunk;
only the messages of the chunk still being filled (at most ``chunk_size`` bytes, or those since the
last :meth:`McapBagWriter.flush`) are lost, and ``metadata.yaml`` is missing, so ``rosbags``
cannot open the directory until it is rewritten -- :func:`recover` does that.

Nothing here imports ``mcap``, ``rclpy`` or the message packages at module import time:
``tether.core`` must stay light.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

__all__ = [
    "McapBagWriter",
    "message_definition",
    "message_definition_for_type",
    "read_raw_messages",
    "recover",
    "type_hash",
    "type_string",
]

#: rosbag2 metadata.yaml version written (Jazzy and Kilted write 9; rosbags reads up to 9).
BAG_VERSION = 9
SEPARATOR = "=" * 80
PRIMITIVES = frozenset(
    {
        "bool",
        "byte",
        "char",
        "float32",
        "float64",
        "int8",
        "uint8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "uint64",
        "string",
        "wstring",
        # ROS 1 leftovers some .msg files still use
        "time",
        "duration",
    }
)
_IDL_TO_MSG = {
    "boolean": "bool",
    "octet": "byte",
    "char": "char",
    "float": "float32",
    "double": "float64",
    "long double": "float64",
    "int8": "int8",
    "uint8": "uint8",
    "int16": "int16",
    "uint16": "uint16",
    "int32": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
    "string": "string",
    "wstring": "wstring",
}


# --------------------------------------------------------------------------- type names


def type_string(msg_class: type) -> str:
    """``sensor_msgs.msg.JointState`` (the class) -> ``"sensor_msgs/msg/JointState"``."""
    parts = msg_class.__module__.split(".")
    if len(parts) < 2 or parts[1] not in ("msg", "srv", "action"):
        raise ValueError(f"{msg_class!r} is not a generated ROS 2 interface class")
    return f"{parts[0]}/{parts[1]}/{msg_class.__name__}"


def _normalize(name: str, package: str) -> str:
    """A field type as written in a .msg (``Header``, ``std_msgs/Header``, ``a/msg/B``) -> ``pkg/msg/Type``."""
    parts = name.split("/")
    if len(parts) == 3:
        return name
    if len(parts) == 2:
        return f"{parts[0]}/msg/{parts[1]}"
    if name == "Header":  # legacy special case of the .msg grammar
        return "std_msgs/msg/Header"
    return f"{package}/msg/{name}"


def _split_type(type_str: str) -> tuple[str, str, str]:
    parts = type_str.split("/")
    if len(parts) == 2:
        return parts[0], "msg", parts[1]
    if len(parts) != 3:
        raise ValueError(f"not a ROS 2 type string: {type_str!r} (expected pkg/msg/Type)")
    return parts[0], parts[1], parts[2]


# --------------------------------------------------------------------------- .msg lookup


def _share_dirs(package: str) -> list[Path]:
    """Candidate ``share/<package>`` folders: AMENT_PREFIX_PATH, this interpreter, the wheel's prefix."""
    prefixes = [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    prefixes += [Path(sys.prefix), Path(sys.base_prefix)]
    try:
        spec = importlib.util.find_spec(package)  # locates the package without importing it
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        # <prefix>/lib/pythonX.Y/site-packages/<pkg>/__init__.py -> <prefix>
        prefixes.append(Path(spec.origin).resolve().parents[4])
        prefixes.append(Path(spec.origin).resolve().parents[1])  # <pkg>/../share in odd layouts
    out: list[Path] = []
    for p in prefixes:
        d = p / "share" / package
        if d not in out and d.is_dir():
            out.append(d)
    return out


def _interface_file(type_str: str, suffix: str) -> Path | None:
    package, kind, name = _split_type(type_str)
    for share in _share_dirs(package):
        f = share / kind / f"{name}{suffix}"
        if f.is_file():
            return f
    return None


def _field_type_of_line(line: str) -> str | None:
    """The (element) type named by one .msg line, or None for blanks, comments and constants."""
    body = line.split("#", 1)[0].strip()
    if not body:
        return None
    tokens = body.split()
    if len(tokens) < 2:
        return None
    base = re.sub(r"\[.*\]$", "", tokens[0])  # arrays: T[], T[3], T[<=3]
    base = re.sub(r"<=\d+$", "", base)  # bounded strings: string<=10
    return base


def _msg_dependencies(text: str, package: str) -> list[str]:
    deps: list[str] = []
    for line in text.splitlines():
        t = _field_type_of_line(line)
        if t is None or t in PRIMITIVES:
            continue
        full = _normalize(t, package)
        if full not in deps:
            deps.append(full)
    return deps


def _msg_text_from_class(type_str: str) -> str:
    """A .msg text generated from the rosidl Python class (used when no .msg file is installed)."""
    package, kind, name = _split_type(type_str)
    cls = getattr(importlib.import_module(f"{package}.{kind}"), name)
    lines: list[str] = []
    meta = type(cls)
    consts = getattr(meta, f"_{meta.__name__}__constants", None) or {}
    fields: dict[str, str] = cls.get_fields_and_field_types()
    for fname, idl in fields.items():
        lines.append(f"{_idl_to_msg_type(idl)} {fname}")
    for cname, value in consts.items():
        ctype = _constant_type(value)
        if ctype is not None:
            lines.append(f"{ctype} {cname}={value}")
    return "\n".join(lines) + "\n"


def _constant_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return None


def _idl_to_msg_type(idl: str) -> str:
    """``sequence<double>`` -> ``float64[]``, ``sequence<int32, 3>`` -> ``int32[<=3]``, ..."""
    m = re.fullmatch(r"sequence<(.+?)(?:,\s*(\d+))?>", idl)
    if m:
        inner = _idl_to_msg_type(m.group(1))
        return f"{inner}[<={m.group(2)}]" if m.group(2) else f"{inner}[]"
    m = re.fullmatch(r"(.+)\[(\d+)\]", idl)
    if m:
        return f"{_idl_to_msg_type(m.group(1))}[{m.group(2)}]"
    m = re.fullmatch(r"(w?string)<(\d+)>", idl)
    if m:
        return f"{m.group(1)}<={m.group(2)}"
    if idl in _IDL_TO_MSG:
        return _IDL_TO_MSG[idl]
    if "/" in idl:
        return _normalize(idl, "")
    raise ValueError(f"unknown rosidl type {idl!r}")


def _msg_text(type_str: str) -> str:
    f = _interface_file(type_str, ".msg")
    if f is not None:
        return f.read_text(encoding="utf-8")
    return _msg_text_from_class(type_str)


def message_definition_for_type(type_str: str) -> str:
    """The full rosbag2 ``ros2msg`` definition of ``pkg/msg/Type``.

    The type's own .msg text, then, depth first in field order, each nested type once after a
    line of 80 ``=`` and ``MSG: pkg/msg/Type`` -- the layout of rosbag2's message definition
    cache. The .msg files come from ``share/<pkg>/msg/`` (a ROS install or the PyPI wheels);
    without them the text is generated from the rosidl Python class (comments and defaults lost).
    """
    package, kind, name = _split_type(type_str)
    top = f"{package}/{kind}/{name}"
    seen = {top}
    parts: list[str] = []

    def visit(t: str, depth: int) -> None:
        text = _msg_text(t)
        if depth > 0:
            parts.append(f"{SEPARATOR}\nMSG: {t}\n")
        parts.append(text if text.endswith("\n") else text + "\n")
        for dep in _msg_dependencies(text, _split_type(t)[0]):
            if dep not in seen:
                seen.add(dep)
                visit(dep, depth + 1)

    visit(top, 0)
    return "".join(parts)


def message_definition(msg_class: type) -> str:
    """The full rosbag2 message definition of a generated message class (see :func:`message_definition_for_type`)."""
    return message_definition_for_type(type_string(msg_class))


def type_hash(type_str: str) -> str:
    """The RIHS01 type hash from the installed ``<Type>.json`` type description, or ``""``."""
    f = _interface_file(type_str, ".json")
    if f is None:
        return ""
    try:
        hashes = json.loads(f.read_text(encoding="utf-8")).get("type_hashes", [])
    except (OSError, ValueError):
        return ""
    package, kind, name = _split_type(type_str)
    for h in hashes:
        if h.get("type_name") == f"{package}/{kind}/{name}":
            return str(h.get("hash_string", ""))
    return ""


# --------------------------------------------------------------------------- writer


@dataclass
class _Topic:
    name: str
    type: str
    qos_yaml: str
    digest: str
    channel_id: int
    count: int = 0


@dataclass
class _Stats:
    start_ns: int | None = None
    end_ns: int | None = None
    topics: dict[str, _Topic] = field(default_factory=dict)


class McapBagWriter:
    """Writes serialized (CDR) ROS 2 messages to a rosbag2 MCAP bag directory.

    >>> bag = McapBagWriter("out/episode_000")           # doctest: +SKIP
    >>> bag.add_topic("/joint_states", "sensor_msgs/msg/JointState")
    >>> bag.write("/joint_states", serialize_message(msg), stamp_ns)
    >>> bag.close()                                      # summary, footer, metadata.yaml

    The directory must not exist or be empty. Not thread-safe: call from one thread (a recorder
    node's executor thread). ``chunk_size`` bounds what a SIGKILL can lose (see the module doc).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        chunk_size: int = 768 * 1024,
        compression: str = "zstd",
        ros_distro: str | None = None,
    ) -> None:
        from mcap import __version__ as mcap_version
        from mcap.writer import CompressionType, Writer

        self.path = Path(directory)
        if self.path.exists() and any(self.path.iterdir()):
            raise FileExistsError(f"bag directory {self.path} exists and is not empty")
        self.path.mkdir(parents=True, exist_ok=True)
        self.mcap_path = self.path / f"{self.path.name}_0.mcap"
        self.ros_distro = ros_distro or os.environ.get("ROS_DISTRO", "kilted")
        self._file: _DirectFile | None = _DirectFile(self.mcap_path)
        comp = {
            "zstd": CompressionType.ZSTD,
            "lz4": CompressionType.LZ4,
            "": CompressionType.NONE,
            "none": CompressionType.NONE,
        }[compression]
        self._writer = Writer(self._file, chunk_size=chunk_size, compression=comp)  # type: ignore[arg-type]
        self._writer.start(profile="ros2", library=f"tether-mcap-bag; mcap-python {mcap_version}")
        self._schemas: dict[str, int] = {}
        self._stats = _Stats()

    # -- topics and messages

    def add_topic(
        self,
        name: str,
        msg_type: str,
        qos_profile_yaml: str = "",
        *,
        definition: str | None = None,
    ) -> None:
        """Declare a topic. ``msg_type`` is ``pkg/msg/Type``; ``qos_profile_yaml`` is the YAML list
        of offered QoS profiles rosbag2 stores per topic (may be empty). ``definition`` overrides
        the generated message definition."""
        if name in self._stats.topics:
            existing = self._stats.topics[name]
            if existing.type != msg_type:
                raise ValueError(f"topic {name} already added with type {existing.type}")
            return
        package, kind, tname = _split_type(msg_type)
        msg_type = f"{package}/{kind}/{tname}"
        if msg_type not in self._schemas:
            text = definition if definition is not None else message_definition_for_type(msg_type)
            self._schemas[msg_type] = self._writer.register_schema(
                name=msg_type, encoding="ros2msg", data=text.encode("utf-8")
            )
        digest = type_hash(msg_type)
        metadata = {"offered_qos_profiles": qos_profile_yaml}
        if digest:
            metadata["topic_type_hash"] = digest
        channel_id = self._writer.register_channel(
            topic=name,
            message_encoding="cdr",
            schema_id=self._schemas[msg_type],
            metadata=metadata,
        )
        self._stats.topics[name] = _Topic(name, msg_type, qos_profile_yaml, digest, channel_id)

    def write(
        self, topic: str, data: bytes, log_time_ns: int, publish_time_ns: int | None = None
    ) -> None:
        """Append one serialized message; ``log_time_ns`` is the receive (or sim) time in ns."""
        if self._file is None:
            raise RuntimeError("bag is closed")
        t = self._stats.topics.get(topic)
        if t is None:
            raise KeyError(f"topic {topic} was not added (call add_topic first)")
        self._writer.add_message(
            channel_id=t.channel_id,
            log_time=int(log_time_ns),
            data=bytes(data),
            publish_time=int(log_time_ns if publish_time_ns is None else publish_time_ns),
            sequence=t.count,
        )
        t.count += 1
        s = self._stats
        s.start_ns = log_time_ns if s.start_ns is None else min(s.start_ns, log_time_ns)
        s.end_ns = log_time_ns if s.end_ns is None else max(s.end_ns, log_time_ns)

    def flush(self) -> None:
        """End the chunk in progress and hand it to the OS: it survives a SIGKILL from now on."""
        if self._file is not None:
            self._writer.flush()

    @property
    def message_count(self) -> int:
        return sum(t.count for t in self._stats.topics.values())

    # -- closing

    def bag_info(self) -> dict[str, Any]:
        """The ``rosbag2_bagfile_information`` mapping of metadata.yaml."""
        s = self._stats
        start = s.start_ns or 0
        duration = (s.end_ns - start) if s.end_ns is not None else 0
        count = self.message_count
        return {
            "version": BAG_VERSION,
            "storage_identifier": "mcap",
            "relative_file_paths": [self.mcap_path.name],
            "duration": {"nanoseconds": duration},
            "starting_time": {"nanoseconds_since_epoch": start},
            "message_count": count,
            "topics_with_message_count": [
                {
                    "topic_metadata": {
                        "name": t.name,
                        "type": t.type,
                        "serialization_format": "cdr",
                        "offered_qos_profiles": _qos_list(t.qos_yaml),
                        "type_description_hash": t.digest,
                    },
                    "message_count": t.count,
                }
                for t in s.topics.values()
            ],
            "compression_format": "",
            "compression_mode": "",
            "files": [
                {
                    "path": self.mcap_path.name,
                    "starting_time": {"nanoseconds_since_epoch": start},
                    "duration": {"nanoseconds": duration},
                    "message_count": count,
                }
            ],
            "custom_data": {},
            "ros_distro": self.ros_distro,
        }

    def close(self) -> None:
        """Write the ``rosbag2`` metadata record, the summary and footer, then metadata.yaml."""
        if self._file is None:
            return
        info = self.bag_info()
        text = yaml.safe_dump(info, sort_keys=False)
        self._writer.add_metadata(
            "rosbag2", {"serialized_metadata": text, "ROS_DISTRO": self.ros_distro}
        )
        self._writer.finish()
        self._file.close()
        self._file = None
        _write_metadata_yaml(self.path, info)

    def __enter__(self) -> McapBagWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _DirectFile:
    """A write-through binary file: every write reaches the OS at once (no user-space buffer).

    Deliberately not an ``io.RawIOBase`` (the mcap writer would wrap that in a BufferedWriter).
    The mcap writer hands over whole records (a finished chunk and its message indexes), so
    writes are few and large.
    """

    def __init__(self, path: Path) -> None:
        self._f: IO[bytes] = open(path, "wb", buffering=0)  # noqa: SIM115

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data).cast("B")
        total = len(view)
        while view:
            n = self._f.write(view)
            if n is None:  # pragma: no cover - only non-blocking files
                continue
            view = view[n:]
        return total

    def tell(self) -> int:
        return self._f.tell()

    def flush(self) -> None:
        """Nothing is buffered here; the data is already with the OS."""

    def fsync(self) -> None:
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()


def _qos_list(qos_yaml: str) -> list[Any]:
    if not qos_yaml.strip():
        return []
    loaded = yaml.safe_load(qos_yaml)
    return loaded if isinstance(loaded, list) else []


def _write_metadata_yaml(directory: Path, info: dict[str, Any]) -> None:
    tmp = directory / "metadata.yaml.tmp"
    tmp.write_text(
        yaml.safe_dump({"rosbag2_bagfile_information": info}, sort_keys=False), encoding="utf-8"
    )
    tmp.replace(directory / "metadata.yaml")


# --------------------------------------------------------------------------- reading


def read_raw_messages(mcap_path: str | os.PathLike[str]) -> Iterator[tuple[str, str, int, bytes]]:
    """Stream ``(topic, type, log_time_ns, cdr_bytes)`` from an MCAP file, complete or truncated.

    Uses the non-seeking reader, so a file cut short by a crash yields every message of its
    completed chunks and stops cleanly at the first incomplete record.
    """
    from mcap.exceptions import McapError
    from mcap.reader import NonSeekingReader

    with open(mcap_path, "rb") as f:
        reader = NonSeekingReader(f, validate_crcs=True)
        it = reader.iter_messages(log_time_order=False)
        while True:
            try:
                schema, channel, message = next(it)
            except StopIteration:
                return
            except (McapError, EOFError, ValueError):
                return  # truncated tail of a killed writer
            yield channel.topic, schema.name if schema else "", message.log_time, message.data


def recover(directory: str | os.PathLike[str]) -> int:
    """Rewrite a killed writer's bag into a complete one; returns the messages kept.

    Reads the completed chunks of ``<dir>/<dir>_0.mcap`` and writes them (same schemas, channels
    and QoS metadata) to a fresh file with summary, footer and metadata.yaml, replacing the old.
    """
    from mcap.exceptions import McapError
    from mcap.reader import NonSeekingReader

    d = Path(directory)
    src = d / f"{d.name}_0.mcap"
    tmp_dir = d.parent / f".{d.name}.recover"
    if tmp_dir.exists():
        for p in tmp_dir.iterdir():
            p.unlink()
        tmp_dir.rmdir()
    out = McapBagWriter(tmp_dir)
    kept = 0
    with open(src, "rb") as f:
        it = NonSeekingReader(f, validate_crcs=True).iter_messages(log_time_order=False)
        while True:
            try:
                schema, channel, message = next(it)
            except StopIteration:
                break
            except (McapError, EOFError, ValueError):
                break
            if channel.topic not in out._stats.topics and schema is not None:
                out.add_topic(
                    channel.topic,
                    schema.name,
                    channel.metadata.get("offered_qos_profiles", ""),
                    definition=schema.data.decode("utf-8"),
                )
            out.write(channel.topic, message.data, message.log_time, message.publish_time)
            kept += 1
    out.close()
    (tmp_dir / f"{tmp_dir.name}_0.mcap").replace(src)
    info = yaml.safe_load((tmp_dir / "metadata.yaml").read_text(encoding="utf-8"))
    bag = info["rosbag2_bagfile_information"]
    bag["relative_file_paths"] = [src.name]
    for f_ in bag.get("files", []):
        f_["path"] = src.name
    _write_metadata_yaml(d, bag)
    (tmp_dir / "metadata.yaml").unlink()
    tmp_dir.rmdir()
    return kept
