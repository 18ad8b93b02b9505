"""Which items a page holds. Pages are numbered from 1."""


def page_count(total, size):
    """How many pages `total` items fill, `size` a page."""
    if size <= 0:
        raise ValueError("size must be positive")
    return (total + size - 1) // size


def page_slice(items, page, size):
    """The items on page `page` (the first page is 1)."""
    if page < 1:
        raise ValueError("pages are numbered from 1")
    start = page * size
    return items[start:start + size]
