"""A page as text: its items one a line, and a footer."""
from pager.paging import page_count, page_slice


def render_page(items, page, size):
    lines = [f"- {item}" for item in page_slice(items, page, size)]
    lines.append(f"page {page} of {page_count(len(items), size)}")
    return "\n".join(lines)
