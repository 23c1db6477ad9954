"""`S3MediaStore`: the media store at scale, on Amazon S3 or any S3-compatible service.

Needs the `s3` extra (boto3). Images are objects under `prefix`, named by their
content-addressed key, so every worker and client of a deployment shares them
and a repeated upload rewrites the same object with the same bytes.

Imported on its own, so that `dex_agents.stores` never needs boto3.
"""

from .stores._s3 import S3MediaStore

__all__ = ["S3MediaStore"]
