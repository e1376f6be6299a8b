"""Log folders given as URLs: ``file://`` is a local path, any other scheme is refused.

torch's ``SummaryWriter`` hands its folder to TensorBoard's ``gfile``, which writes
``s3://``, ``gs://`` or ``hdfs://`` through boto3 / fsspec when they are installed. A
plain ``os.makedirs("s3://bucket/run")`` instead makes a local folder named ``s3:``,
and the run is silently somewhere nobody looks. mindwatch writes locally: its writer
fsyncs, rotates files, re-creates a folder deleted under it, and claims a run folder so
that two runs never mix, none of which an object store offers through a file-like
API, and ``run.json`` and ``alerts.jsonl`` are rewritten and appended to while the run
goes on. So a URL with another scheme is refused, naming it and the two ways that work:
a local folder synced to the store, or the store mounted as a folder.
"""

from __future__ import annotations

import re
import urllib.parse

from mindwatch.common.redact import redact_url

__all__ = ["local_path"]

# A URL scheme: a letter, then letters, digits, '+', '-' or '.', then '://'. Two
# characters at least, so that a Windows drive ('C://data') is not taken for one.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")


def local_path(text: str) -> str:
    """``text`` as a local path: unchanged unless it is a URL; a ``file://`` URL becomes
    its path (percent-escapes decoded; host empty or ``localhost``). Any other URL
    (``s3://``, ``gs://``, ``hdfs://``, ``obs://``, ``http://``...) raises ValueError
    saying what to do instead."""
    match = _SCHEME.match(text)
    if match is None:
        return text
    scheme = match.group(1).lower()
    shown = redact_url(text)  # an access key in the URL never reaches a log
    if scheme == "file":
        rest = text[match.end() :]
        host, slash, path = rest.partition("/")
        if host not in ("", "localhost"):
            raise ValueError(
                f"the log folder '{shown}' is a file:// URL on another machine; "
                "pass a path on this one (file:///path/to/run, or /path/to/run)"
            )
        # Read leniently: '#' and '?' are part of the path, as a folder name may hold them.
        return urllib.parse.unquote(slash + path)
    raise ValueError(
        f"the log folder '{shown}' is a URL ({scheme}://): mindwatch writes its event files, "
        "run.json and alerts.jsonl to a local folder (fsync, rotation and run folders "
        "that never mix need one). Write to a local folder and copy it to the store "
        "(aws s3 sync, gsutil rsync, hdfs dfs -put, obsutil sync), or mount the store "
        "(s3fs, gcsfuse, obsfs) and pass the mount's path."
    )
