"""S3: is anything stored under a job's checkpoint URI?"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from medic.adapters.aws import client as make_client


class Checkpoints:
    def __init__(self, client: Any = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("s3")
        return self._client

    def exist(self, s3_uri: str) -> bool:
        parsed = urlparse(s3_uri)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise ValueError(f"not an S3 URI: {s3_uri!r}")
        prefix = parsed.path.lstrip("/")
        listing = self.client.list_objects_v2(Bucket=parsed.netloc, Prefix=prefix, MaxKeys=1)
        return listing.get("KeyCount", 0) > 0
