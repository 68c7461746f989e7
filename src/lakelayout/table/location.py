"""Where a table lives: one place for every path and URI rule.

A table location is a local path or a URI (``file://``, ``s3://`` ...). Local
locations become absolute paths; others stay URIs without a trailing slash.
Data files are named relative to the table root, as Delta's log names them.
"""

from __future__ import annotations

import os
import urllib.parse

import pyarrow as pa
import pyarrow.fs as pafs

from lakelayout.errors import InvalidOption


def is_local(uri: str) -> bool:
    """Whether ``uri`` is a local path (no scheme, or ``file://``).

    >>> is_local("/data/t"), is_local("file:///data/t"), is_local("s3://bucket/t")
    (True, True, False)
    """
    return "://" not in uri or uri.startswith("file://")


def local_path(uri: str) -> str:
    """The absolute local path of a local location (``file://`` or ``file:`` stripped,
    %-escapes kept).

    ``file:/data/t`` is the form Spark and Hadoop print; it was taken for a path relative
    to the working folder (an audit).

    >>> local_path("file:///data/t"), local_path("file:/data/t")
    ('/data/t', '/data/t')
    """
    if uri.startswith("file://"):
        uri = uri[len("file://") :]
    elif uri.startswith("file:/"):
        uri = uri[len("file:") :]
    return os.path.abspath(uri)


def normalize_uri(uri: str | os.PathLike[str]) -> str:
    """Absolute path for local tables, the URI without a trailing slash otherwise.

    An empty location is an :class:`~lakelayout.errors.InvalidOption`.

    >>> normalize_uri("s3://bucket/t/")
    's3://bucket/t'
    """
    text = os.fspath(uri) if not isinstance(uri, str) else uri
    if not text or not text.strip():
        raise InvalidOption("table location is empty")
    return local_path(text) if is_local(text) else text.rstrip("/")


def file_uri_path(file_uri: str) -> str:
    """A data file's path from the URI Spark reports (``_metadata.file_path``).

    >>> file_uri_path("file:///data/t/part%20a.parquet")
    '/data/t/part a.parquet'
    """
    parsed = urllib.parse.urlparse(file_uri)
    return urllib.parse.unquote(parsed.path) if parsed.scheme == "file" else file_uri


def resolve_location(table_uri: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem and root path of a table location (path or URI)."""
    text = str(table_uri)
    if not text:
        raise InvalidOption("table location is empty")
    if "://" not in text:
        return pafs.LocalFileSystem(), os.path.abspath(text).rstrip("/") or "/"
    try:
        filesystem, root = pafs.FileSystem.from_uri(text)
    except (pa.ArrowInvalid, ValueError) as exc:
        raise InvalidOption(f"cannot use table location '{text}': {exc}") from exc
    return filesystem, root.rstrip("/") or "/"


#: the folder of a table holding lakelayout's own state (indexes, logs, provenance)
STATE_FOLDER = "_lakelayout"


def prepare_location(table_uri: str) -> None:
    """Create the table directory; InvalidOption if the location is a file."""
    filesystem, root = resolve_location(table_uri)
    info = filesystem.get_file_info(root)
    if info.type == pafs.FileType.File:
        raise InvalidOption(f"table location '{table_uri}' is a file, not a directory")
    if info.type == pafs.FileType.NotFound:
        filesystem.create_dir(root, recursive=True)


def existing_entries(table_uri: str) -> list[str]:
    """Names directly inside the location (sorted); empty when it is missing or empty.

    InvalidOption when the location is a file.
    """
    filesystem, root = resolve_location(table_uri)
    info = filesystem.get_file_info(root)
    if info.type == pafs.FileType.File:
        raise InvalidOption(f"table location '{table_uri}' is a file, not a directory")
    if info.type == pafs.FileType.NotFound:
        return []
    listing = filesystem.get_file_info(pafs.FileSelector(root, allow_not_found=True))
    return sorted(
        entry.base_name + ("/" if entry.type == pafs.FileType.Directory else "")
        for entry in listing
    )
