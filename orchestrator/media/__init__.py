"""The media store: where tools put the pictures and files they make (``docs/media.md``).

:class:`MediaStore` is the one interface (``await store.put(data, name, content_type) -> url``);
:class:`DirectoryStore` (a folder: ``file://`` URLs, or http ones where the folder is served) and
:class:`~baton.media.s3.S3Store` (an S3-compatible bucket: presigned or public http(s) URLs; the
``s3`` extra) implement it, and :func:`open_store` picks one from the ``media`` setting. A
sub-agent's tools reach their process's store through
:func:`baton.subagents.context.media_store`.
"""

from baton.media.choose import DEFAULT_MEDIA, media_directory, open_store
from baton.media.directory import DirectoryStore, directory_of
from baton.media.store import MediaError, MediaStore, check_name, extension_for

__all__ = [
    "DEFAULT_MEDIA",
    "DirectoryStore",
    "MediaError",
    "MediaStore",
    "check_name",
    "directory_of",
    "extension_for",
    "media_directory",
    "open_store",
]
