"""The images a PixelLab session made, kept by id so later calls can refer to them."""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass

from salon.integrations._http import VendorError

__all__ = ["ImageStore", "StoredImage"]


@dataclass(frozen=True, slots=True)
class StoredImage:
    id: str
    data: bytes
    mime_type: str
    width: int
    height: int
    description: str
    direction: str | None = None


class ImageStore:
    """The latest images by id, so later calls can refer to them; the oldest go first."""

    def __init__(self, keep: int) -> None:
        self._keep = keep
        self._images: OrderedDict[str, StoredImage] = OrderedDict()
        self._ids = itertools.count(1)

    def add(
        self,
        data: bytes,
        mime_type: str,
        size: tuple[int, int],
        description: str,
        direction: str | None = None,
    ) -> StoredImage:
        image = StoredImage(f"px{next(self._ids)}", data, mime_type, *size, description, direction)
        self._images[image.id] = image
        while len(self._images) > self._keep:
            self._images.popitem(last=False)
        return image

    def get(self, image_id: str) -> StoredImage:
        image = self._images.get(image_id.strip())
        if image is None:
            raise VendorError(
                f"there is no image {image_id!r} (ids look like px3; old ones are forgotten): "
                "generate one first"
            )
        return image
