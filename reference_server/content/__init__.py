"""Document and image content blocks: checked by the API's rules, documents rendered to text."""

from reference_server.content.documents import (
    MAX_PDF_BYTES,
    MAX_PDF_PAGES,
    RenderedDocument,
    check_pdf_page_total,
    render_document,
    render_search_result,
)
from reference_server.content.images import (
    MAX_IMAGE_BYTES,
    MAX_IMAGE_DIMENSION,
    MAX_IMAGES_PER_REQUEST,
    ImageInfo,
    check_image,
    check_image_count,
    image_tokens,
    max_dimension,
)

__all__ = [
    "MAX_IMAGES_PER_REQUEST",
    "MAX_IMAGE_BYTES",
    "MAX_IMAGE_DIMENSION",
    "MAX_PDF_BYTES",
    "MAX_PDF_PAGES",
    "ImageInfo",
    "RenderedDocument",
    "check_image",
    "check_image_count",
    "check_pdf_page_total",
    "image_tokens",
    "max_dimension",
    "render_document",
    "render_search_result",
]
