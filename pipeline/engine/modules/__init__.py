"""The engine's own modules for ChatTTS's weight files, read without importing ChatTTS.

Each holds one upstream file's tensors under upstream's names (built on the meta device, then
given the file's tensors), with widths read from the file; the engine's runners compute with them.
ChatTTS itself is loaded only to encode a voice from a recording (``audio_encoder``).
"""
