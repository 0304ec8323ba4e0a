# The one image every tts-jobs service runs (workers, migration, Flower, bulk runs).
#   docker build -t tts-jobs .      (docker-compose.yml builds it as tts-jobs:latest)
# GPU workers need the NVIDIA Container Toolkit on the host; the CUDA runtime comes with torch's wheels.
#
# The base image is pinned by tag only: its digest could not be looked up where this file is
# written (no registry access but Python's package index), and a digest is never written down
# unverified. To pin it, resolve the tag where Docker Hub is reachable and add the digest:
#   docker buildx imagetools inspect python:3.11-slim     # prints "Digest: sha256:..."
#   FROM python:3.11-slim@sha256:<that digest>
# (docs/cluster.md, "docker compose", says the same of the redis and postgres images.)
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# ffmpeg encodes the audiobooks (pydub calls it); the Debian package is enough.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ffmpeg \
    && rm -rf /var/lib/apt/lists/*

# An unprivileged user; the named volumes inherit these owners on first use.
RUN useradd --create-home --uid 1000 tts \
    && mkdir -p /data /models /audiobooks \
    && chown tts:tts /data /models /audiobooks

WORKDIR /app

# Dependencies first, from the lock alone: this layer (torch is gigabytes) is rebuilt only when
# the lock changes, not on every code change. requirements.lock pins every package at the version
# the test suite runs on, and pip checks each file's hash (scripts/lock writes it).
COPY requirements.lock ./
RUN pip install --require-hashes -r requirements.lock
# torchao, for INT8 on the GPU (TTS_JOBS_PRECISION=int8), hash-checked like the rest;
# it needs nothing more at run time (requirements-gpu.lock).
COPY requirements-gpu.lock ./
RUN pip install --require-hashes --no-deps -r requirements-gpu.lock

COPY pyproject.toml README.md ./
COPY jobs ./jobs
COPY pipeline ./pipeline
COPY storage ./storage
COPY migrations ./migrations
RUN pip install --no-deps . && rm -rf build

USER tts
# Settings come from the environment (see jobs/settings.py); the data dir is the shared volume.
ENV TTS_JOBS_DATA_DIR=/data
CMD ["tts-jobs", "--help"]
