"""An S3-compatible endpoint for the lake tests and benchmarks: moto's server on a free local port."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

# The AWS variables ledger.lake reads (and every process started after inherits), for moto's endpoint.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "turnledger-test", "AWS_SECRET_ACCESS_KEY": "turnledger-test-secret",
               "AWS_REGION": "us-east-1"}  # fmt: skip


@dataclass
class S3Server:
    server: Any
    url: str

    def environment(self) -> dict[str, str]:
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.url}

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def objects(self, bucket: str) -> list[str]:
        listed = self.client().list_objects_v2(Bucket=bucket)
        return [o["Key"] for o in listed.get("Contents", [])]

    def client(self) -> Any:
        import boto3

        env = self.environment()
        return boto3.client(
            "s3", endpoint_url=self.url, aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name=env["AWS_REGION"],
        )  # fmt: skip

    def stop(self) -> None:
        self.server.stop()


def start_s3() -> S3Server:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    os.environ.setdefault("MOTO_ALLOW_NONEXISTENT_REGION", "true")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return S3Server(server, f"http://{host}:{port}")
