"""The gain and peak limiter one chapter gets, as the ffmpeg filter chain every encode of it runs
(:mod:`pipeline.audio.export` decides them from the chapter's measures). Light on purpose: `run`
checks this host's ffmpeg with the very chain before the model loads
(:mod:`pipeline.audio.ffmpeg_check`), without importing the assembly."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.types import SAMPLE_RATE

LIMITER_MARGIN_DB = 1.0  # headroom under the true-peak ceiling for lossy codecs' overshoot
LIMITER_OVERSAMPLING = 2  # the rate the limiter runs at, in multiples of the speech's
MAX_GAIN_DB = 30.0  # never amplify a near-silent chapter into a wall of noise


@dataclass(frozen=True)
class Loudness:
    """The gain (and, if needed, limiter) applied to every output of one chapter."""

    gain_db: float = 0.0
    limit_dbfs: float | None = None  # the limiter's ceiling (2x oversampled peaks); None = no limiter

    @property
    def volume_db(self) -> float:
        """The gain as the ``volume`` filter gets it (two decimals; none below 0.005 dB)."""
        return float(f"{self.gain_db:.2f}") if abs(self.gain_db) >= 0.005 else 0.0

    def ffmpeg_filter(self, output_samples: int) -> str:
        """An ffmpeg ``-af`` chain: gain, limiter, then exactly ``output_samples`` out.

        The final pad+trim pins the length to the sample whatever the filters before it do, which
        keeps chapter marks exact; padding adds silence, trimming only ever removes trailing silence.
        """
        steps = []
        if self.volume_db:
            steps.append(f"volume={self.volume_db:.2f}dB")
        if self.limit_dbfs is not None:
            # alimiter looks at samples; run at twice the rate it sees the peaks between them
            # too (speech's peaks come from its lower frequencies, under-read by ~0.2 dB at 3 kHz;
            # LIMITER_MARGIN_DB covers that and the codec's overshoot). 4x cost 14 % more of an
            # encode's CPU (soxr both ways: 2.31 against 1.99 CPU-s per 600 s of audio, the kit's
            # ffmpeg 7.0.2), which a book's preparation beside the GPU is short of.
            # latency=1 compensates its look-ahead delay so marks stay sample-accurate;
            # level=0 stops it from re-normalising its output to full scale.
            limit = 10.0 ** (self.limit_dbfs / 20.0)
            steps += [
                f"aresample={LIMITER_OVERSAMPLING * SAMPLE_RATE}:resampler=soxr",
                f"alimiter=limit={limit:.4f}:attack=5:release=50:level=0:latency=1",
                f"aresample={SAMPLE_RATE}:resampler=soxr",
            ]
        steps += ["apad", f"atrim=end_sample={output_samples}"]
        return ",".join(steps)
