# The one image every tts-jobs service runs (workers, migration, Flower, bulk runs).
#   docker build -t tts-jobs .      (docker-compose.yml builds it as tts-jobs:latest)
# GPU workers need the NVIDIA Container Toolkit on the host; the CUDA runtime comes with torch's wheels.
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

# Dependencies first, from pyproject.toml alone: this layer (torch is gigabytes) is rebuilt only
# when the dependencies change, not on every code change. Empty packages stand in for the code.
COPY pyproject.toml README.md ./
RUN mkdir -p jobs pipeline storage migrations \
    && touch jobs/__init__.py pipeline/__init__.py storage/__init__.py migrations/__init__.py \
    && pip install . \
    && pip uninstall -y tts-jobs \
    && rm -rf jobs pipeline storage migrations build

COPY jobs ./jobs
COPY pipeline ./pipeline
COPY storage ./storage
COPY migrations ./migrations
RUN pip install --no-deps . && rm -rf build

USER tts
# Settings come from the environment (see jobs/settings.py); the data dir is the shared volume.
ENV TTS_JOBS_DATA_DIR=/data
CMD ["tts-jobs", "--help"]
