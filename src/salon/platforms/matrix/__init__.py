"""Matrix through mautrix (the ``matrix`` extra)."""

from salon.platforms.matrix.platform import ENCRYPTED_REFUSAL, MatrixPlatform

__all__ = ["ENCRYPTED_REFUSAL", "MatrixPlatform"]
